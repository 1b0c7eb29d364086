package cartesia

import "voicesvc/web"

// registerWebSocket adds GET /tts/websocket at path (the realtime socket).
func (c *Protocol) registerWebSocket(h web.Host, path string, root bool) {}
