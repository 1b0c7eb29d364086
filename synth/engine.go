package synth

import (
	"voicesvc/control"
	"voicesvc/engine"
)

// EngineFor returns the engine that renders v: the built-in engine, or the
// upstream the voice names. A voice whose engine the server does not
// configure is 503 unavailable (EngineError). Every transport picks its
// engine here, so none of them knows what kind of engine it is; the codec
// pipeline takes the engine's NativeRate, which differs per engine.
func EngineFor(reg *engine.Registry, v *control.Voice) (engine.Engine, error) {
	if reg == nil {
		return nil, control.Errorf(control.EUnavailable, "no synthesis engine is configured")
	}
	e, err := reg.For(v.Engine)
	if err != nil {
		return nil, EngineError(err)
	}
	return e, nil
}
