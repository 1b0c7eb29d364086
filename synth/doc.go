// Package synth is the application core of voicesvc: one synthesis, whatever
// protocol it arrives in, from its credentials to its last byte (Service,
// service.go), and the pieces it is made of:
//
//   - credentials (credentials.go): AuthKey and AuthToken, over the API-key
//     cache (keycache.go), which the store's change feed resets;
//   - voices (voice.go, voicecache.go): Voice, the one access rule (id, then
//     workspace alias, then catalog alias; the workspace's own or public; a
//     token's voice_ids on the resolved id; ready), the aliases, the catalog
//     (catalog.go);
//   - validation (options.go, openai.go, fields.go): Rules, one function per
//     field, used by every protocol's parser under its own field names;
//   - admission (admit.go): AllowRequest (rps) and Admit (the engine, the
//     balance, session and stream slots, the charge, the token's use), and
//     the Admission that frees them and refunds;
//   - the job (job.go, prepare.go, engine.go, run.go): engine choice,
//     language and settings, the codec pipeline, Run into a Sink, Finish;
//   - the resources' rules, for every protocol that serves them: voice
//     fields and the voices resource (voicefields.go, voices.go), uploads,
//     clips and enrollment (enroll.go), access tokens, keys and usage
//     (grants.go), the dashboard's sign-in and sessions (dashboard.go),
//     and the change feed that keeps the caches fresh (changes.go);
//   - the word clock of timestamps (words.go) and SSE framing (sse.go).
//
// The order of one synthesis, each step refusing before the next costs
// anything:
//
//	p, err := svc.AuthKey(key)                        // 401
//	_, err = svc.AllowRequest(ctx, p)                 // 429 rate_limited
//	o, err := synth.ParseSpeak(body)                  // 400s, the protocol's field names
//	job, err := svc.Begin(ctx, p, voiceRef, o, false) // 404, 403, 400; 403/429/402/401 refusals
//	res, err := job.Run(ctx, sink)                    // the protocol's framing in sink
//	job.Finish(delivered)                             // no audio delivered: refunded; slots freed
//
// Rules the protocols keep (package web's Host does it for HTTP):
//
//   - Finish exactly once, whatever happened; pass 0 when the client got no
//     audio (a buffered answer that failed, a client gone before its
//     first byte), so that it is not billed.
//   - A sink returns the first failed write: Run then cancels the engine
//     work and returns that error unchanged, so the protocol can tell a
//     client gone (no answer owed) from a synthesis failure (*control.Error).
//   - A streaming answer chooses its status at the first audio: a failure
//     before it is an error with a status, after it the protocol's own end
//     (an SSE error event, a cut body, a task_failed frame).
package synth
