package control

import "time"

// SetMeterClock pins the meter's month for the external tests.
func SetMeterClock(m *StoreMeter, now func() time.Time) { m.now = now }
