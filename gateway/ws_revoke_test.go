package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"voicesvc/control"
)

// keyIDOf returns the id of the key with this secret.
func (ts *testServer) keyIDOf(secret string) string {
	ts.t.Helper()
	sum := sha256.Sum256([]byte(secret))
	k, err := ts.store.GetAPIKeyByHash(context.Background(), sum[:])
	if err != nil {
		ts.t.Fatal(err)
	}
	return k.ID
}

// expectRevoked reads c until the server closes: the last frame must be the
// fatal unauthorized, the close 4401.
func expectRevoked(t *testing.T, c *websocket.Conn) {
	t.Helper()
	// Generous: the rule is 2 seconds, the machine is shared.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var last map[string]any
	for {
		typ, b, err := c.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			if ce.Code != 4401 || last["type"] != "error" || last["code"] != "unauthorized" || last["fatal"] != true {
				t.Fatalf("close %d after %v, want the fatal unauthorized and 4401", ce.Code, last)
			}
			return
		}
		if err != nil {
			t.Fatalf("want a close, got %v (last %v)", err, last)
		}
		if typ == websocket.TextMessage {
			last = nil
			if err := json.Unmarshal(b, &last); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A key revoked or expired while its sessions run ends them: the session's
// own key, or the key that created its access token, on this server or on
// another one sharing the store. Before, a session authenticated once at
// its handshake and kept running (and billing) for as long as it stayed
// open.
func TestWSRevokedKeyEndsSessions(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	ss.waitLive()
	ctx := context.Background()
	revoke := func(secret string) {
		if _, err := ss.store.RevokeAPIKey(ctx, ss.keyIDOf(secret), control.NowMS()); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("own key", func(t *testing.T) {
		key := ss.newKey(ss.ws.ID, nil, 0, false)
		other := ss.newKey(ss.ws.ID, nil, 0, false)
		c, r, err := ss.wsDial("", wsKey(key))
		if err != nil {
			t.Fatalf("dial: %v (%s)", err, wsCode(r))
		}
		defer c.Close()
		bystander, r, err := ss.wsDial("", wsKey(other))
		if err != nil {
			t.Fatalf("dial: %v (%s)", err, wsCode(r))
		}
		defer bystander.Close()
		speakOnce(t, c, ss.voice, "a")
		used := ss.used(t)
		revoke(key)
		expectRevoked(t, c)
		if got := ss.used(t); got != used {
			t.Fatalf("billed %d characters after the revocation", got-used)
		}
		// The other key's session goes on.
		speakOnce(t, bystander, ss.voice, "b")
	})

	t.Run("key that created the token", func(t *testing.T) {
		key := ss.newKey(ss.ws.ID, nil, 0, false)
		tok := ss.do("POST", "/tokens", key, map[string]any{}).data(t, 201)["token"].(string)
		c, r, err := ss.wsDial("access_token="+tok, nil)
		if err != nil {
			t.Fatalf("dial: %v (%s)", err, wsCode(r))
		}
		defer c.Close()
		speakOnce(t, c, ss.voice, "a")
		revoke(key)
		expectRevoked(t, c)
	})

	t.Run("expiry", func(t *testing.T) {
		key := ss.newKey(ss.ws.ID, nil, control.NowMS()+1500, false)
		c, r, err := ss.wsDial("", wsKey(key))
		if err != nil {
			t.Fatalf("dial: %v (%s)", err, wsCode(r))
		}
		defer c.Close()
		expectRevoked(t, c)
	})
}

// used is the workspace's characters used this month.
func (ss *synthServer) used(t *testing.T) int64 {
	t.Helper()
	b, err := ss.store.Balance(context.Background(), ss.ws.ID, control.Month(time.Now()), 0)
	if err != nil {
		t.Fatal(err)
	}
	return b.Used
}
