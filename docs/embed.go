// Package docs holds the user documentation of voicesvc (api.md,
// realtime.md, openapi.yaml) and renders it for the server: the files are
// embedded in the binary, so a running server documents itself with
// nothing fetched at run time.
package docs

import (
	"embed"
	"io/fs"
)

//go:embed README.md api.md realtime.md dialects.md openapi.yaml
var files embed.FS

// FS is the documentation as it is in the repository.
func FS() fs.FS { return files }

// OpenAPI is docs/openapi.yaml.
func OpenAPI() []byte {
	b, err := files.ReadFile("openapi.yaml")
	if err != nil {
		panic("docs: openapi.yaml is not embedded: " + err.Error())
	}
	return b
}
