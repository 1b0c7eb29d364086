-- The engine that renders a voice: '' is the built-in engine, anything else
-- an upstream engine the server's configuration names. A remix inherits its
-- base voice's.
ALTER TABLE voices ADD COLUMN engine TEXT NOT NULL DEFAULT '';
