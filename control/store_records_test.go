package control

import (
	"errors"
	"slices"
	"testing"
)

func TestPlanCatalog(t *testing.T) {
	existing := []*Voice{
		{ID: "id-keep", Alias: "keep", Name: "Keep", CreatedAt: 1, UpdatedAt: 2},
		{ID: "id-change", Alias: "change", Name: "Old", CreatedAt: 1, UpdatedAt: 2},
		{ID: "id-drop", Alias: "drop", Name: "Drop", CreatedAt: 1, UpdatedAt: 2},
	}
	wanted := []*Voice{
		{Alias: "keep", Name: "Keep"},
		{Alias: "change", Name: "New"},
		{Alias: "new", Name: "New"},
	}
	p := PlanCatalog("cat", existing, wanted, 100)
	if len(p.Insert) != 1 || p.Insert[0].Alias != "new" || p.Insert[0].ID == "" || p.Insert[0].CreatedAt != 100 {
		t.Errorf("insert = %+v", p.Insert)
	}
	if len(p.Update) != 1 || p.Update[0].ID != "id-change" || p.Update[0].CreatedAt != 1 || p.Update[0].UpdatedAt != 100 {
		t.Errorf("update = %+v", p.Update)
	}
	if len(p.Delete) != 1 || p.Delete[0].ID != "id-drop" {
		t.Errorf("delete = %+v", p.Delete)
	}
	if got := p.Changed(); !slices.Equal(got, []string{"id-change", "id-drop"}) {
		t.Errorf("changed = %v", got)
	}
	// An unchanged voice keeps its id and timestamps: restarts do not churn.
	if k := wanted[0]; k.ID != "id-keep" || k.CreatedAt != 1 || k.UpdatedAt != 2 {
		t.Errorf("kept voice = %+v", k)
	}
	for _, v := range wanted {
		if v.OrgID != "cat" {
			t.Errorf("%s: org %q", v.Alias, v.OrgID)
		}
	}
}

func TestJobFinish(t *testing.T) {
	jerr := &JobError{Code: "x"}
	for _, c := range []struct {
		name, status, owner, to string
		jerr                    *JobError
		changed                 bool
		code                    string
		progress                int
	}{
		{"succeed", JobRunning, "w1", JobSucceeded, nil, true, "", 100},
		{"fail keeps progress", JobRunning, "w1", JobFailed, jerr, true, "", 40},
		{"repeat is a no-op", JobSucceeded, "w1", JobSucceeded, nil, false, "", 40},
		{"other owner", JobRunning, "w2", JobSucceeded, nil, false, ENotFound, 40},
		{"not running", JobPending, "w1", JobFailed, jerr, false, ENotFound, 40},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := &Job{Status: c.status, LeaseOwner: "w1", Progress: 40}
			changed, err := j.Finish(c.owner, c.to, c.jerr, 7)
			var e *Error
			if changed != c.changed || (c.code == "") != (err == nil) || err != nil && (!errors.As(err, &e) || e.Code != c.code) {
				t.Fatalf("Finish = %v, %v", changed, err)
			}
			if j.Progress != c.progress {
				t.Errorf("progress %d, want %d", j.Progress, c.progress)
			}
			if changed && (j.Status != c.to || j.Error != c.jerr || j.UpdatedAt != 7) {
				t.Errorf("job = %+v", j)
			}
		})
	}
}
