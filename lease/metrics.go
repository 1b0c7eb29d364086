package lease

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Stats is what a server holds now (for /metrics and tests).
type Stats struct {
	Slots             map[string]SlotStats // by kind
	Reserved          int64                // characters reserved, not yet charged
	Unsettled         int64                // characters charged, not yet settled
	Requests          int                  // requests of rps shares not yet admitted, still valid
	Workspaces        int                  // workspaces with leases or usage held
	Syncs, SyncErrors int64                // store calls made, and those that failed
}

// SlotStats are the slots of one kind over every workspace.
type SlotStats struct{ Held, InUse int }

// Stats sums the leases held now.
func (m *Manager) Stats() Stats {
	pools, accts, rates := m.snapshot()
	now := m.now()
	s := Stats{Slots: map[string]SlotStats{}, Syncs: m.syncs.Load(), SyncErrors: m.syncErrors.Load()}
	ws := map[string]bool{}
	for _, p := range pools {
		p.mu.Lock()
		k := s.Slots[p.k.kind]
		k.Held += p.held
		k.InUse += p.inUse
		s.Slots[p.k.kind] = k
		p.mu.Unlock()
		ws[p.k.ws] = true
	}
	for _, a := range accts {
		a.mu.Lock()
		s.Reserved += max(a.avail, 0)
		for _, n := range a.pending {
			s.Unsettled += n
		}
		a.mu.Unlock()
		ws[a.ws] = true
	}
	for _, r := range rates {
		r.mu.Lock()
		if now.Before(r.until) {
			s.Requests += r.left
			ws[r.ws] = true
		}
		r.mu.Unlock()
	}
	s.Workspaces = len(ws)
	return s
}

var (
	descSlots = prometheus.NewDesc("voicesvc_lease_slots",
		"Concurrency (stream) and realtime-session slots this server holds from the store, and those in use.",
		[]string{"kind", "state"}, nil)
	descReserved = prometheus.NewDesc("voicesvc_lease_reserved_characters",
		"Characters this server has reserved from workspaces' balances and not yet charged.", nil, nil)
	descUnsettled = prometheus.NewDesc("voicesvc_lease_unsettled_characters",
		"Characters charged on this server and not yet written to the store's usage.", nil, nil)
	descRequests = prometheus.NewDesc("voicesvc_lease_requests",
		"Requests of workspaces' rps windows this server holds (shares granted, not yet admitted, still valid).", nil, nil)
	descWorkspaces = prometheus.NewDesc("voicesvc_lease_workspaces",
		"Workspaces for which this server holds leases.", nil, nil)
	descSyncs = prometheus.NewDesc("voicesvc_lease_syncs_total",
		"Store calls made for leases, by result.", []string{"result"}, nil)
)

// Collector reports the leases held, computed at each scrape.
func (m *Manager) Collector() prometheus.Collector { return collector{m} }

type collector struct{ m *Manager }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSlots, descReserved, descUnsettled, descRequests, descWorkspaces, descSyncs} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.Stats()
	for _, kind := range []string{"stream", "session"} {
		k := s.Slots[kind]
		ch <- prometheus.MustNewConstMetric(descSlots, prometheus.GaugeValue, float64(k.Held), kind, "held")
		ch <- prometheus.MustNewConstMetric(descSlots, prometheus.GaugeValue, float64(k.InUse), kind, "in_use")
	}
	ch <- prometheus.MustNewConstMetric(descReserved, prometheus.GaugeValue, float64(s.Reserved))
	ch <- prometheus.MustNewConstMetric(descUnsettled, prometheus.GaugeValue, float64(s.Unsettled))
	ch <- prometheus.MustNewConstMetric(descRequests, prometheus.GaugeValue, float64(s.Requests))
	ch <- prometheus.MustNewConstMetric(descWorkspaces, prometheus.GaugeValue, float64(s.Workspaces))
	ch <- prometheus.MustNewConstMetric(descSyncs, prometheus.CounterValue, float64(s.Syncs-s.SyncErrors), "ok")
	ch <- prometheus.MustNewConstMetric(descSyncs, prometheus.CounterValue, float64(s.SyncErrors), "error")
}
