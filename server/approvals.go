package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// maxAnswerBytes bounds the body of an answer: a digest and a word.
const maxAnswerBytes = 4096

// Error codes of the approval routes.
const (
	codeUnknownQuestion = "unknown_question"
	codeDigestMismatch  = "digest_mismatch"
	codeAnswered        = "already_answered"
)

// OwnQuestions stands in the approval routes for a pair ID: the
// questions of the server itself rather than of one pair (a candidate
// generation of the MCP servers its pairs share).
const OwnQuestions = "server"

// approvalView is one pending question as the API shows it.
type approvalView struct {
	Question         string          `json:"question"`
	Worker           string          `json:"worker"`
	Run              string          `json:"run"`
	Call             string          `json:"call"`
	Tool             string          `json:"tool"`
	Effect           string          `json:"effect"`
	Replay           string          `json:"replay"`
	Arguments        json.RawMessage `json:"arguments,omitempty"`
	ArgumentsPreview string          `json:"arguments_preview,omitempty"`
	ArgumentsBytes   int             `json:"arguments_bytes"`
	Digest           string          `json:"digest"`
}

// listApprovals serves GET /v1/pairs/{id}/approvals: the pair's questions
// waiting for an answer, oldest first. The server's own are a 204 No
// Content when its host asks none (Config.ServerQuestions): the page
// then stops asking, without an error in the browser's console.
func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) {
	pairID := r.PathValue("id")
	if pairID == OwnQuestions && !s.cfg.ServerQuestions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if pairID != OwnQuestions && s.lookup(pairID) == nil {
		if _, err := s.describe(r.Context(), pairID); err != nil {
			s.storeError(w, err)
			return
		}
	}
	out := []approvalView{}
	if s.cfg.Approvals != nil {
		for _, a := range s.cfg.Approvals.Pending() {
			if a.Pair != pairID {
				continue
			}
			out = append(out, approvalView{
				Question: string(a.Question), Worker: a.Worker, Run: string(a.Run), Call: string(a.Call),
				Tool: a.Tool, Effect: a.Effect, Replay: a.Replay, Arguments: a.Arguments,
				ArgumentsPreview: a.ArgumentsPreview, ArgumentsBytes: a.ArgumentsBytes, Digest: a.Digest,
			})
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Approvals []approvalView `json:"approvals"`
	}{out})
}

// waiting counts the pair's pending questions.
func (s *Server) waiting(pairID string) int {
	if s.cfg.Approvals == nil {
		return 0
	}
	n := 0
	for _, a := range s.cfg.Approvals.Pending() {
		if a.Pair == pairID {
			n++
		}
	}
	return n
}

// answerBody is the body of POST /v1/pairs/{id}/approvals/{question}.
type answerBody struct {
	Answer string `json:"answer"` // "approve" or "deny"
	Digest string `json:"digest"` // the question's digest: what the answer is bound to
}

// answerApproval serves POST /v1/pairs/{id}/approvals/{question}: 200
// once the answer is given to the waiting call; 404 for a question that is
// not pending; 409 for a digest that is not the question's (nothing is
// answered) or a question answered already.
func (s *Server) answerApproval(w http.ResponseWriter, r *http.Request) {
	if bodyType(r.Header.Get("Content-Type")) != "application/json" {
		fail(w, http.StatusUnsupportedMediaType, codeUnsupportedType, `the body must be application/json: {"answer":"approve"|"deny","digest":"..."}`)
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAnswerBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			fail(w, http.StatusRequestEntityTooLarge, codeBodyTooLarge, "an answer is at most 4096 bytes")
			return
		}
		fail(w, http.StatusBadRequest, codeBadRequest, "reading the body failed")
		return
	}
	b, err := decodeAnswer(raw)
	if err != nil {
		writeError(w, http.StatusBadRequest, apiError{Code: codeBadRequest, Message: err.Error()})
		return
	}
	pairID, question := r.PathValue("id"), r.PathValue("question")
	if id.Check("question", question) != nil || s.cfg.Approvals == nil {
		fail(w, http.StatusNotFound, codeUnknownQuestion, "no such question is pending")
		return
	}
	err = s.cfg.Approvals.Answer(pairID, id.Interaction(question), b.Digest, b.Answer == "approve")
	switch {
	case errors.Is(err, orchestrator.ErrUnknownQuestion):
		fail(w, http.StatusNotFound, codeUnknownQuestion, "no such question is pending")
	case errors.Is(err, orchestrator.ErrDigestMismatch):
		fail(w, http.StatusConflict, codeDigestMismatch, "the digest is not the question's; nothing was answered")
	case errors.Is(err, orchestrator.ErrAnswered):
		fail(w, http.StatusConflict, codeAnswered, "the question has its answer already")
	case err != nil:
		fail(w, http.StatusInternalServerError, codeInternal, "answering failed")
	default:
		writeJSON(w, http.StatusOK, struct {
			Question string `json:"question"`
			Answer   string `json:"answer"`
		}{question, b.Answer})
	}
}

// decodeAnswer reads an answer body strictly: one object, no unknown
// fields, nothing after it.
func decodeAnswer(raw []byte) (answerBody, error) {
	var b answerBody
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&b); err != nil {
		return b, errors.New(`the body must be {"answer":"approve"|"deny","digest":"..."}`)
	}
	if _, err := d.Token(); err != io.EOF {
		return b, errors.New("data after the answer object")
	}
	if b.Answer != "approve" && b.Answer != "deny" {
		return b, errors.New("answer: want approve or deny")
	}
	if b.Digest == "" || len(b.Digest) > 128 {
		return b, errors.New("digest: the question's digest is required")
	}
	return b, nil
}
