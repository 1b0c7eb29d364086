package gateway

import (
	"voicesvc/control"
	"voicesvc/langtag"
)

// checkLanguage refuses a tag no engine speaks, by the rule every
// transport shares (langtag.Match). Without an engine (not wired yet)
// only the shape was checked.
func (s *Server) checkLanguage(tag string) error {
	if s.engines == nil {
		return nil
	}
	if _, ok := langtag.Match(tag, s.engines.Languages()); ok {
		return nil
	}
	return control.Errorf(control.EInvalidLanguage, "language %q is not supported", tag)
}
