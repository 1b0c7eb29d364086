package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"voicesvc/control"
)

// TestDailyUsageMatchesUsed: after a realtime context is cancelled (its
// unspoken text refunded), the day's characters and the month's used agree
// (the dashboard showed 2,970 used against 4,058 in its daily chart).
func TestDailyUsageMatchesUsed(t *testing.T) {
	ss := newSynthServer(t, synthOpts{eng: newRef(1), billing: control.BillingEnforce})
	c, _, err := ss.wsDial("", wsKey(ss.key))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	long := strings.Repeat("A sentence of the long text, which goes on for a while. ", 30)
	if err := c.WriteJSON(map[string]any{"type": "task_start", "context_id": "a", "voice_id": ss.voice,
		"text": long, "finalize": true}); err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, "audio_chunk")
	if err := c.WriteJSON(map[string]any{"type": "task_cancel", "context_id": "a"}); err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, "task_cancelled")
	speakOnce(t, c, ss.voice, "b")
	c.Close()
	var used, daily int64
	if _, ok := waitFor(5*time.Second, func() bool {
		used = ss.used(t)
		today := control.Day(time.Now())
		days, err := ss.store.DailyUsage(context.Background(), ss.ws.ID, today, today)
		if err != nil {
			t.Fatal(err)
		}
		daily = 0
		for _, d := range days {
			daily += d.Characters
		}
		return used > 0 && used == daily
	}); !ok {
		t.Fatalf("used %d, today's characters %d: they differ", used, daily)
	}
	if used >= int64(len(long)) {
		t.Fatalf("used %d: the cancelled text was not refunded", used)
	}
}
