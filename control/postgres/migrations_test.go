package postgres_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestMigratedFunctions: after every migration the schema holds one
// definition of each limiter and billing function, the one the code calls;
// the ones 004 superseded are gone.
func TestMigratedFunctions(t *testing.T) {
	dsn := MustSchemaDSN(t)
	MustOpenDB(t, dsn)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT p.proname || '/' || p.pronargs FROM pg_proc p
		JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = current_schema() ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"billing_charge/6", "billing_daily_add/3", "limiter_now_ms/0", "limiter_rate_lease/5", "limiter_rate_take/2", "limiter_slot_take/7", "limiter_slots_lease/7", "limiter_slots_release/1"}
	if !slices.Equal(got, want) {
		t.Errorf("functions %v, want %v", got, want)
	}
}
