package cartesia

import (
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/jsonw"
)

// GET /voices: the voices the workspace may speak with (its own first,
// then the public ones), in Cartesia's paged list shape, so that the
// official client's voices.list() (which pages with starting_after until a
// page comes back empty) and voice pickers work:
//
//	{"data": [{"id", "name", "description", "is_owner", "is_public",
//	           "access": "private"|"public", "visibility": "owner"|"all",
//	           "language", "locales": [{"locale", "is_native"}],
//	           "created_at", "tagline", "gender": null, "accent": null,
//	           "country": null, "preview_file_url": null}],
//	 "has_more": bool, "next_page": "<id>"|null}
//
// Query: limit (1-100, default 10), starting_after / ending_before (a voice
// id of the list), q (in the name, description or id, any case), is_owner
// (true: the workspace's own; false: the others). gender and expand are
// accepted and ignored. ids are voice ids; voice.id takes them, and the
// aliases it also takes are listed by the native API.

const (
	defaultVoicesLimit = 10
	maxVoicesLimit     = 100
	// maxVoices bounds the list a page is cut from (the core's).
	maxVoices = 10_000
)

var (
	argLimit         = []byte("limit")
	argStartingAfter = []byte("starting_after")
	argEndingBefore  = []byte("ending_before")
	argQ             = []byte("q")
	argIsOwner       = []byte("is_owner")
	contentTypeJSON  = []byte("application/json")
)

func (c *Protocol) voices(ctx *fasthttp.RequestCtx, p *control.Principal) {
	q := ctx.QueryArgs()
	limit := defaultVoicesLimit
	if raw := q.PeekBytes(argLimit); len(raw) > 0 {
		n, err := strconv.Atoi(string(raw))
		if err != nil || n < 1 || n > maxVoicesLimit {
			c.h.WriteError(ctx, paramError("limit", "limit must be an integer from 1 to 100"))
			return
		}
		limit = n
	}
	owner := 0 // 0: any, 1: own, -1: others
	switch string(q.PeekBytes(argIsOwner)) {
	case "":
	case "true":
		owner = 1
	case "false":
		owner = -1
	default:
		c.h.WriteError(ctx, paramError("is_owner", "is_owner must be true or false"))
		return
	}
	all, err := c.h.Core().UsableVoices(ctx, p, maxVoices)
	if err != nil {
		c.h.WriteError(ctx, err)
		return
	}
	search := strings.ToLower(string(q.PeekBytes(argQ)))
	list := all[:0:0]
	for _, v := range all {
		own := v.OrgID == p.WorkspaceID
		if owner == 1 && !own || owner == -1 && own {
			continue
		}
		if search != "" && !strings.Contains(strings.ToLower(v.Name), search) &&
			!strings.Contains(strings.ToLower(v.Description), search) && !strings.Contains(v.ID, search) {
			continue
		}
		list = append(list, v)
	}
	page, more := pageOf(list, string(q.PeekBytes(argStartingAfter)), string(q.PeekBytes(argEndingBefore)), limit)
	b := append([]byte(nil), `{"data":[`...)
	for i, v := range page {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendVoice(b, v, v.OrgID == p.WorkspaceID)
	}
	b = append(b, `],"has_more":`...)
	b = strconv.AppendBool(b, more)
	b = append(b, `,"next_page":`...)
	if more && len(page) > 0 {
		b = jsonw.AppendString(b, page[len(page)-1].ID)
	} else {
		b = append(b, "null"...)
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.Response.SetBodyRaw(append(b, '}'))
}

// pageOf cuts the page of limit voices after the cursor (or, with
// before, the limit voices before it). A cursor not in the list gives an
// empty page: the voice went, and a client paging on stops.
func pageOf(list []*control.Voice, after, before string, limit int) (page []*control.Voice, more bool) {
	index := func(id string) int {
		for i, v := range list {
			if v.ID == id {
				return i
			}
		}
		return -1
	}
	switch {
	case before != "":
		end := index(before)
		if end < 0 {
			return nil, false
		}
		start := max(end-limit, 0)
		return list[start:end], start > 0
	case after != "":
		i := index(after)
		if i < 0 {
			return nil, false
		}
		list = list[i+1:]
	}
	if len(list) > limit {
		return list[:limit], true
	}
	return list, false
}

// appendVoice writes one voice in Cartesia's voice shape.
func appendVoice(b []byte, v *control.Voice, own bool) []byte {
	b = append(b, `{"id":`...)
	b = jsonw.AppendString(b, v.ID)
	b = append(b, `,"name":`...)
	b = jsonw.AppendString(b, v.Name)
	b = append(b, `,"description":`...)
	b = jsonw.AppendString(b, v.Description)
	b = append(b, `,"is_owner":`...)
	b = strconv.AppendBool(b, own)
	public := v.Visibility == "public"
	b = append(b, `,"is_public":`...)
	b = strconv.AppendBool(b, public)
	if public {
		b = append(b, `,"access":"public","visibility":"all"`...)
	} else {
		b = append(b, `,"access":"private","visibility":"owner"`...)
	}
	b = append(b, `,"language":`...)
	b = jsonw.AppendString(b, baseLanguage(v.PrimaryLanguage))
	b = append(b, `,"locales":[{"locale":`...)
	b = jsonw.AppendString(b, v.PrimaryLanguage)
	b = append(b, `,"is_native":true}],"created_at":`...)
	b = jsonw.AppendString(b, time.UnixMilli(v.CreatedAt).UTC().Format(time.RFC3339))
	return append(b, `,"tagline":"","gender":null,"accent":null,"country":null,"preview_file_url":null}`...)
}

// paramError is a 400 about a query parameter.
func paramError(param, msg string) error {
	e := control.Errorf(control.EInvalidRequest, "%s", msg)
	e.Param = param
	return e
}

// baseLanguage is a tag's language subtag ("en" of "en-US").
func baseLanguage(tag string) string {
	lang, _, _ := strings.Cut(tag, "-")
	return lang
}
