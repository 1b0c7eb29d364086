package elevenlabs

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/jsonw"
	"voicesvc/synth"
)

// The account endpoints, in the shapes the vendor's client parses (it
// validates the fields it requires, so each is written here even where
// voicesvc has nothing to say: zero, false, an empty list):
//
//	GET /v1/voices             {"voices":[{"voice_id","name","category","labels","description","preview_url"}]}
//	GET /v1/models             [{"model_id":"service-v1","can_do_text_to_speech":true,...,"languages":[...]}]
//	GET /v1/user/subscription  {"tier","character_count","character_limit",...}

const (
	// model is the one model; every model_id a request names routes to it.
	model = "service-v1"
	// maxVoices bounds one voices answer: the listing has no paging.
	maxVoices = 10_000
)

// GET /v1/voices: every ready voice the key may speak with, its
// workspace's own ("cloned") and the public ones ("premade"), each under
// the names a voice_id path takes (its alias or id, and each workspace
// alias).
func (e *Protocol) voices(ctx *fasthttp.RequestCtx, p *control.Principal) {
	voices, err := e.h.Core().UsableVoicesWithAliases(ctx, p, maxVoices)
	if err != nil {
		e.h.WriteError(ctx, err)
		return
	}
	b := append([]byte(nil), `{"voices":[`...)
	n := 0
	entry := func(id string, v *control.Voice) {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = appendVoice(b, id, v, p.WorkspaceID)
	}
	for _, u := range voices {
		name := u.Voice.Alias
		if name == "" {
			name = u.Voice.ID
		}
		entry(name, u.Voice)
		for _, a := range u.Aliases {
			entry(a, u.Voice)
		}
	}
	writeJSON(ctx, append(b, "]}"...))
}

// appendVoice writes one voice of the list under the name id.
func appendVoice(b []byte, id string, v *control.Voice, ws string) []byte {
	b = append(b, `{"voice_id":`...)
	b = jsonw.AppendString(b, id)
	b = append(b, `,"name":`...)
	b = jsonw.AppendString(b, v.Name)
	b = append(b, `,"category":`...)
	if v.OrgID == ws {
		b = append(b, `"cloned"`...)
	} else {
		b = append(b, `"premade"`...)
	}
	b = append(b, `,"labels":{`...)
	hasLanguage := false
	for i, l := range v.Labels {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonw.AppendString(b, l.Key)
		b = append(b, ':')
		b = jsonw.AppendString(b, l.Value)
		hasLanguage = hasLanguage || l.Key == "language"
	}
	if !hasLanguage && v.PrimaryLanguage != "" {
		if len(v.Labels) > 0 {
			b = append(b, ',')
		}
		b = append(b, `"language":`...)
		b = jsonw.AppendString(b, v.PrimaryLanguage)
	}
	b = append(b, `},"description":`...)
	b = jsonw.AppendString(b, v.Description)
	b = append(b, `,"preview_url":`...)
	b = jsonw.AppendString(b, v.SampleAudioURL)
	return append(b, '}')
}

// GET /v1/models: the one model, with the languages of the server's
// engines.
func (e *Protocol) models(ctx *fasthttp.RequestCtx, _ *control.Principal) {
	b := append([]byte(nil), `[{"model_id":"`+model+`","name":"voicesvc","description":"voicesvc's engines; every model_id routes here",`+
		`"can_be_finetuned":false,"can_do_text_to_speech":true,"can_do_voice_conversion":false,"can_use_style":false,`+
		`"can_use_speaker_boost":false,"serves_pro_voices":false,"token_cost_factor":1,"requires_alpha_access":false,`+
		`"max_characters_request_free_user":`+strconv.Itoa(synth.MaxTextChars)+
		`,"max_characters_request_subscribed_user":`+strconv.Itoa(synth.MaxTextChars)+
		`,"maximum_text_length_per_request":`+strconv.Itoa(synth.MaxTextChars)+`,"languages":[`...)
	if reg := e.h.Core().Engines(); reg != nil {
		for i, l := range reg.Languages() {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"language_id":`...)
			b = jsonw.AppendString(b, l)
			b = append(b, `,"name":`...)
			b = jsonw.AppendString(b, l)
			b = append(b, '}')
		}
	}
	writeJSON(ctx, append(b, "]}]"...))
}

// GET /v1/user/subscription: character_count is this UTC month's used
// characters and character_limit the allowance plus the prepaid credits,
// from voicesvc's metering; the reset is the next month's start.
func (e *Protocol) subscription(ctx *fasthttp.RequestCtx, p *control.Principal) {
	u, err := e.h.Core().Usage(ctx, p)
	if err != nil {
		e.h.WriteError(ctx, err)
		return
	}
	writeJSON(ctx, appendSubscription(nil, p.Plan, u.Balance, time.Now()))
}

// appendSubscription writes the subscription of a workspace on plan with
// balance bal at now.
func appendSubscription(b []byte, plan string, bal control.Balance, now time.Time) []byte {
	now = now.UTC()
	reset := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	status := "active"
	if plan == "free" {
		status = "free"
	}
	b = append(b, `{"tier":`...)
	b = jsonw.AppendString(b, plan)
	b = append(b, `,"character_count":`...)
	b = strconv.AppendInt(b, bal.Used, 10)
	b = append(b, `,"character_limit":`...)
	b = strconv.AppendInt(b, bal.Allowance+bal.Credits, 10)
	b = append(b, `,"next_character_count_reset_unix":`...)
	b = strconv.AppendInt(b, reset.Unix(), 10)
	b = append(b, `,"max_character_limit_extension":0,"max_credit_limit_extension":0,`+
		`"can_extend_character_limit":false,"allowed_to_extend_character_limit":false,`+
		`"voice_slots_used":0,"professional_voice_slots_used":0,"professional_voice_slots_used_in_workspace":0,`+
		`"voice_limit":0,"voice_add_edit_counter":0,"professional_voice_limit":0,"can_extend_voice_limit":false,`+
		`"can_use_instant_voice_cloning":true,"can_use_professional_voice_cloning":false,"currency":"usd",`+
		`"current_overage":{"amount":"0","currency":"usd"},"status":"`...)
	b = append(b, status...)
	return append(b, `","billing_period":"monthly_period","character_refresh_period":"monthly_period",`+
		`"open_invoices":[],"has_open_invoices":false}`...)
}

func writeJSON(ctx *fasthttp.RequestCtx, b []byte) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.Response.SetBodyRaw(b)
}
