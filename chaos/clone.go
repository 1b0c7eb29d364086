package chaos

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// cloneText is long enough for the 6 s of continuous speech a clone needs.
const cloneText = "The old lighthouse keeper walked along the shore every morning, counting the boats that came back from the sea. " +
	"He remembered the names of all the sailors, and he waved to each of them as they passed. " +
	"When the weather turned bad, he lit the lamp early and waited until every boat was safely home."

// Clip is a reference WAV made at run time: espeak-ng to a file, then sox
// to 16-bit PCM. Made once per suite.
func (s *Suite) Clip() ([]byte, error) {
	s.clipOnce.Do(func() {
		raw, wav := filepath.Join(s.Tmp, "clip-raw.wav"), filepath.Join(s.Tmp, "clip.wav")
		if out, err := exec.Command("espeak-ng", "-v", "en-us", "-w", raw, cloneText).CombinedOutput(); err != nil {
			s.clipErr = fmt.Errorf("espeak-ng: %v: %s", err, out)
			return
		}
		if out, err := exec.Command("sox", raw, "-b", "16", wav).CombinedOutput(); err != nil {
			s.clipErr = fmt.Errorf("sox: %v: %s", err, out)
			return
		}
		s.clip, s.clipErr = os.ReadFile(wav)
	})
	return s.clip, s.clipErr
}

// Clone posts a clone upload of clip and returns the answer.
func (e *Env) Clone(name string, clip []byte) *Resp {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	w.WriteField("name", name)
	w.WriteField("language", "en")
	w.WriteField("consent", "true")
	fw, _ := w.CreateFormFile("file", "ref.wav")
	fw.Write(clip)
	w.Close()
	return Call("POST", e.Srv.API+"/voices/clone", b.Bytes(), "X-API-Key", e.Key, "Content-Type", w.FormDataContentType())
}

// WaitJob polls a clone job until it is terminal or limit passes and
// returns its last status.
func (e *Env) WaitJob(job string, limit time.Duration) string {
	status := ""
	waitFor(limit, func() bool {
		r := Call("GET", e.Srv.API+"/jobs/"+job, nil, "X-API-Key", e.Key)
		if r.Status != 200 {
			status = r.Outcome()
			return false
		}
		status, _ = r.Data()["status"].(string)
		switch status {
		case "succeeded", "failed", "cancelled", "expired":
			return true
		}
		return false
	})
	return status
}

// cloneIDs are the voice and job of a 202 clone answer.
func cloneIDs(r *Resp) (voice, job string) {
	d := r.Data()
	if v, ok := d["voice"].(map[string]any); ok {
		voice, _ = v["id"].(string)
	}
	job, _ = d["job_id"].(string)
	return voice, job
}

// previewPath is the path part of a voice's sample_audio_url ("" if none).
func (e *Env) previewPath(voice string) (string, *Resp) {
	r := Call("GET", e.Srv.API+"/voices/"+voice, nil, "X-API-Key", e.Key)
	v, _ := r.Data()["voice"].(map[string]any)
	if v == nil {
		v = r.Data()
	}
	u, _ := v["sample_audio_url"].(string)
	if u == "" {
		return "", r
	}
	if pu, err := url.Parse(u); err == nil {
		return pu.Path, r
	}
	return u, r
}
