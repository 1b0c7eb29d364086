package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// The statements of the request path, prepared once per connection. modernc
// compiles SQL text on every call that does not go through a prepared
// statement, and compiling was about 40% of a charge. Statements run
// inside a write transaction go through tx.StmtContext, which finds the
// statement already prepared on the pool's single write connection.
const (
	// sqlChargeFast takes a charge that fits in the month's allowance in
	// one statement: the conditional upsert adds chars only if
	// used stays within the allowance, so the check and the write cannot
	// interleave with another charge (a write statement holds SQLite's
	// write lock from its first step, waiting for it under busy_timeout like
	// BEGIN IMMEDIATE). No row back: the workspace is unknown or the charge
	// needs credits or a refusal, which the transaction of chargeSlow
	// decides. ?1 workspace, ?2 month, ?3 allowance, ?4 chars.
	sqlChargeFast = `INSERT INTO usage (workspace_id, month, used)
		SELECT id, ?2, ?4 FROM workspaces WHERE id = ?1 AND ?4 <= ?3
		ON CONFLICT (workspace_id, month) DO UPDATE SET used = used + excluded.used
			WHERE used + excluded.used <= ?3
		RETURNING used, (SELECT credits FROM workspaces WHERE id = ?1)`
	sqlBalance = `SELECT w.credits, COALESCE(u.used, 0) FROM workspaces w
		LEFT JOIN usage u ON u.workspace_id = w.id AND u.month = ? WHERE w.id = ?`
	sqlUsageAdd = `INSERT INTO usage (workspace_id, month, used) VALUES (?, ?, ?)
		ON CONFLICT (workspace_id, month) DO UPDATE SET used = used + excluded.used`
	sqlDailyAdd = `INSERT INTO usage_daily (workspace_id, day, characters) VALUES (?, ?, ?)
		ON CONFLICT (workspace_id, day) DO UPDATE SET characters = characters + excluded.characters`
	sqlCreditsTake   = `UPDATE workspaces SET credits = credits - ? WHERE id = ?`
	sqlWorkspaceByID = `SELECT ` + workspaceCols + ` FROM workspaces WHERE id = ?`
	sqlKeyByHash     = `SELECT ` + keyCols + ` FROM api_keys WHERE hash = ?`
	sqlTokenByHash   = `SELECT ` + tokenCols + ` FROM access_tokens WHERE hash = ?`
	sqlConsumeToken  = `UPDATE access_tokens SET consumed_at = ?
		WHERE hash = ? AND consumed_at = 0 AND expires_at > ?`
	sqlVoiceByID    = `SELECT ` + voiceCols + ` FROM voices WHERE id = ?`
	sqlVoiceByAlias = `SELECT ` + voiceCols + ` FROM voices
		WHERE alias = ? AND visibility = 'public' ORDER BY created_at, id LIMIT 1`
	sqlAliasResolve = `SELECT voice_id FROM voice_aliases WHERE workspace_id = ? AND alias = ?`
)

// stmts are prepared at Open, when no transaction holds the write
// connection: preparing later, from inside db.update, would wait for the
// pool's only connection, which that transaction holds.
type stmts struct {
	chargeFast, usageAdd, creditsTake, consumeToken *sql.Stmt // write pool
	dailyAdd                                        *sql.Stmt // write pool
	balanceTx                                       *sql.Stmt // write pool
	balance, workspaceByID, keyByHash, tokenByHash  *sql.Stmt // read pool
	voiceByID, voiceByAlias, aliasResolve           *sql.Stmt // read pool
	all                                             []*sql.Stmt
}

func (db *DB) prepare(ctx context.Context) error {
	s := &db.st
	for _, p := range []struct {
		dst  **sql.Stmt
		pool *sql.DB
		q    string
	}{
		{&s.chargeFast, db.write, sqlChargeFast},
		{&s.usageAdd, db.write, sqlUsageAdd},
		{&s.dailyAdd, db.write, sqlDailyAdd},
		{&s.creditsTake, db.write, sqlCreditsTake},
		{&s.consumeToken, db.write, sqlConsumeToken},
		{&s.balanceTx, db.write, sqlBalance},
		{&s.balance, db.read, sqlBalance},
		{&s.workspaceByID, db.read, sqlWorkspaceByID},
		{&s.keyByHash, db.read, sqlKeyByHash},
		{&s.tokenByHash, db.read, sqlTokenByHash},
		{&s.voiceByID, db.read, sqlVoiceByID},
		{&s.voiceByAlias, db.read, sqlVoiceByAlias},
		{&s.aliasResolve, db.read, sqlAliasResolve},
	} {
		st, err := p.pool.PrepareContext(ctx, p.q)
		if err != nil {
			return fmt.Errorf("sqlite: prepare: %w", err)
		}
		*p.dst = st
		s.all = append(s.all, st)
	}
	return nil
}

func (s *stmts) close() error {
	var err error
	for _, st := range s.all {
		err = errors.Join(err, st.Close())
	}
	s.all = nil
	return err
}
