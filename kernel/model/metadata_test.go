package model_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/model"
)

func TestK3_MetadataIsANamespacedJSONObject(t *testing.T) {
	raw := `{"system_fingerprint":"fp_44709d6fcb","usage":{"prompt_tokens":9,"completion_tokens":12,` +
		`"prompt_tokens_details":{"cached_tokens":0}},"prompt_eval_count":26,"token_count":3,"id":"chatcmpl-123"}`
	md, err := model.NewMetadata("openai", []byte(raw))
	require.NoError(t, err)
	require.Equal(t, "openai", md.Namespace())
	require.JSONEq(t, raw, string(md.JSON()))
	require.Equal(t, raw, md.JSONString())
	require.False(t, md.IsZero())

	var zero model.Metadata
	require.True(t, zero.IsZero())
	require.Nil(t, zero.JSON())

	for _, ns := range []string{"", "OpenAI", "open ai", strings.Repeat("a", bound.MaxNameBytes+1)} {
		_, err := model.NewMetadata(ns, []byte(`{}`))
		var be *bound.Error
		require.ErrorAs(t, err, &be, ns)
		require.Equal(t, "metadata.namespace", be.Field)
	}
	for _, bad := range []string{`[]`, `"x"`, `1`, `null`, `{`, `{"a":1}x`, `{"a":1}{}`, " \t", "{\"a\":\"\xff\"}", "{\"\xc3\":1}"} {
		_, err := model.NewMetadata("openai", []byte(bad))
		requireBoundError(t, err, "metadata.json", bound.Malformed)
	}
	_, err = model.NewMetadata("openai", nil)
	requireBoundError(t, err, "metadata.json", bound.Required)
	_, err = model.NewMetadata("openai", []byte(" {} "))
	require.NoError(t, err)
}

func TestK1_MetadataCopiesItsBytes(t *testing.T) {
	raw := []byte(`{"a":"b"}`)
	md, err := model.NewMetadata("openai", raw)
	require.NoError(t, err)
	raw[2] = 'X'
	out := md.JSON()
	out[2] = 'Y'
	require.Equal(t, `{"a":"b"}`, md.JSONString())
	require.Equal(t, `{"a":"b"}`, string(md.JSON()))
}

func TestK2_MetadataBytes(t *testing.T) {
	pad := bound.MaxMetadataBytes - len(`{"a":""}`)
	atLimit := `{"a":"` + strings.Repeat("x", pad) + `"}`
	require.Len(t, atLimit, bound.MaxMetadataBytes)
	md, err := model.NewMetadata("openai", []byte(atLimit))
	require.NoError(t, err)
	require.Len(t, md.JSONString(), bound.MaxMetadataBytes)

	over := `{"a":"` + strings.Repeat("x", pad+1) + `"}`
	be := requireBoundError(t, must2(model.NewMetadata("openai", []byte(over))), "metadata.json", bound.TooLarge)
	require.Equal(t, bound.MaxMetadataBytes, be.Limit)
	require.Equal(t, bound.MaxMetadataBytes+1, be.Got)
}

func must2(_ model.Metadata, err error) error { return err }

// nested returns a JSON object nested depth levels deep, alternating
// objects and arrays: {"a":[{"a":[1]}]} is depth 4.
func nested(depth int) string {
	var open, closing string
	for i := range depth {
		if i%2 == 0 {
			open, closing = open+`{"a":`, "}"+closing
		} else {
			open, closing = open+"[", "]"+closing
		}
	}
	return open + "1" + closing
}

func TestK2_MetadataDepth(t *testing.T) {
	at := nested(bound.MaxMetadataDepth)
	require.True(t, json.Valid([]byte(at)), at)
	_, err := model.NewMetadata("openai", []byte(at))
	require.NoError(t, err, at)

	over := nested(bound.MaxMetadataDepth + 1)
	require.True(t, json.Valid([]byte(over)), over)
	be := requireBoundError(t, must2(model.NewMetadata("openai", []byte(over))), "metadata.depth", bound.TooMany)
	require.Equal(t, bound.MaxMetadataDepth, be.Limit)
	require.Equal(t, bound.MaxMetadataDepth+1, be.Got)
}

// Keys that name credentials, authorization data, prompts or secrets are
// rejected at any depth, in any case and spelling.
func TestK3_MetadataRejectsSensitiveKeysAtAnyDepth(t *testing.T) {
	const secret = "hunter2-value-never-shown"
	keys := []string{
		"authorization", "Authorization", "AUTHORIZATION", "proxy-authorization", "auth", "Auth",
		"oauth", "api_key", "apiKey", "APIKey", "x-api-key", "X-Api-Key", "xapikey", "openai_api_key",
		"token", "access_token", "accessToken", "refresh_token", "id_token", "auth-token", "token_type",
		"secret", "client_secret", "clientSecret", "secrets", "password", "Password", "passwd", "pwd",
		"passphrase", "db_password", "credential", "credentials", "creds", "cookie", "Cookie",
		"set-cookie", "Set-Cookie", "cookies", "bearer", "bearer_token", "session", "session_id",
		"sessionId", "SESSION", "jwt", "private_key", "privateKey", "aws_secret_access_key",
		"access_key", "prompt", "Prompt", "prompts", "system_prompt", "systemPrompt", "SystemPrompt",
		"systemprompt", "user_prompt", "prompt_text", "messages", "Messages", "system", "instructions",
		"input", "au_th", "a-u-t-h", "\u0061uth", "Authori\u007aation",
	}
	for _, key := range keys {
		k, err := json.Marshal(key)
		require.NoError(t, err)
		docs := []string{
			`{` + string(k) + `:"` + secret + `"}`,
			`{"outer":{"list":[{"deep":{` + string(k) + `:"` + secret + `"}}]}}`,
			`{"headers":{` + string(k) + `:1}}`,
		}
		for _, doc := range docs {
			_, err := model.NewMetadata("openai", []byte(doc))
			require.Error(t, err, doc)
			be := requireBoundError(t, err, "metadata.json", bound.Malformed)
			require.Contains(t, be.Detail, "credentials")
			require.NotContains(t, err.Error(), secret)
			// The message is fixed: it quotes neither the key nor the value.
			require.Equal(t, "metadata.json: malformed: an object key names credentials, "+
				"authorization data, prompts or secrets", err.Error())
		}
	}
	// Escapes in the raw JSON do not hide a key.
	_, err := model.NewMetadata("openai", []byte(`{"\u0041uthorization":"x"}`))
	requireBoundError(t, err, "metadata.json", bound.Malformed)
}

// Quantities and labels that merely mention a sensitive word are allowed.
func TestK3_MetadataAllowsQuantitiesAndOrdinaryKeys(t *testing.T) {
	keys := []string{
		"prompt_tokens", "promptTokens", "prompt_tokens_details", "prompt_eval_count",
		"prompt_eval_duration", "prompt_cache_hit_tokens", "prompt_filter_results", "prompt_id",
		"completion_tokens", "total_tokens", "input_tokens", "output_tokens", "cached_tokens",
		"token_count", "token_usage", "tokens", "system_fingerprint", "input_tokens_details",
		"message", "model", "id", "key", "cache_key", "author", "authority", "finish_reason",
		"paid_tokens", "possession", "tokenizer", "reasoning_tokens", "created", "eval_count",
	}
	for _, key := range keys {
		k, err := json.Marshal(key)
		require.NoError(t, err)
		_, err = model.NewMetadata("openai", []byte(`{"x":{`+string(k)+`:1}}`))
		require.NoError(t, err, key)
	}
}

// String values with well-known credential shapes are rejected wherever
// they appear, even under harmless keys, and the error never quotes them.
func TestK3_MetadataRejectsCredentialShapedValues(t *testing.T) {
	values := []string{
		"sk-proj-abcdefghijklmnopqrstuvwxyz0123",
		"sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
		"Bearer abcdefghij0123456789",
		"bearer eyJhbGciOiJIUzI1NiIs.eyJzdWIiOiIxMjM0NTY3.SflKxwRJSMeKKF2QT4",
		"header was Authorization: Bearer 0123456789abcdefgh",
		"eyJhbGciOiJIUzI1NiIs.eyJzdWIiOiIxMjM0NTY3.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
		"ghp_abcdefghijklmnopqrstuvwxyz0123456789",
		"github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
		"glpat-abcdefghijklmnopqrstu",
		"xoxb-1234567890-abcdefghij",
		"AKIAIOSFODNN7EXAMPLE",
		"AIzaSyA-abcdefghijklmnopqrstuvwxyz012345",
		"hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
		"gsk_abcdefghijklmnopqrstuvwxyz",
		"sk_live_abcdefghijklmnop1234",
		"-----BEGIN RSA PRIVATE KEY-----\nMIIE",
		`sk-\u0061bcdefghijklmnopqrstuvwxyz0123`, // escaped in the JSON text
	}
	for _, v := range values {
		quoted := `"` + v + `"`
		if !strings.Contains(v, `\u`) {
			b, err := json.Marshal(v)
			require.NoError(t, err)
			quoted = string(b)
		}
		for _, doc := range []string{`{"note":` + quoted + `}`, `{"a":[1,{"b":` + quoted + `}]}`, `{` + quoted + `:1}`} {
			_, err := model.NewMetadata("openai", []byte(doc))
			be := requireBoundError(t, err, "metadata.json", bound.Malformed)
			require.Contains(t, be.Detail, "credential", v)
			require.NotContains(t, err.Error(), v)
			require.NotContains(t, err.Error(), v[:8])
		}
	}
	for _, v := range []string{
		"task-abcdefghijklmnopqrstuvwxyz", "sk-short", "bearer bonds are paper", "Bearer abc",
		"risk-free-and-lovely-abcdefghijkl", "the basic plan", "eyJshort.x.y", "chatcmpl-123",
		"fp_44709d6fcb", "AKIA", "stop",
	} {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		_, err = model.NewMetadata("openai", []byte(`{"note":`+string(b)+`}`))
		require.NoError(t, err, v)
	}
}

func FuzzNewMetadata(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"a":1}`, `{"usage":{"prompt_tokens":1}}`, `{"authorization":"x"}`,
		`{"a":[{"b":{"c":[1,2,{"d":"sk-abcdefghijklmnopqrstuvwxyz"}]}}]}`,
		`{"\u0061pi_key":"x"}`, `[1]`, `{"a":"\ud800"}`, `{"a":"Bearer 0123456789abcdefg"}`,
		nested(bound.MaxMetadataDepth + 1),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > 2*bound.MaxMetadataBytes {
			return
		}
		md, err := model.NewMetadata("openai", raw)
		if err != nil {
			var be *bound.Error
			require.ErrorAs(t, err, &be)
			require.True(t, strings.HasPrefix(be.Field, "metadata."), be.Field)
			require.True(t, md.IsZero())
			return
		}
		require.LessOrEqual(t, len(raw), bound.MaxMetadataBytes)
		require.True(t, json.Valid(md.JSON()))
		require.True(t, utf8.Valid(md.JSON()))
		var obj map[string]any
		require.NoError(t, json.Unmarshal(md.JSON(), &obj))
		require.Equal(t, string(raw), md.JSONString())
	})
}

func BenchmarkNewMetadata(b *testing.B) {
	raw := []byte(`{"id":"chatcmpl-123","system_fingerprint":"fp_44709d6fcb","usage":{"prompt_tokens":9,` +
		`"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":0}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := model.NewMetadata("openai", raw); err != nil {
			b.Fatal(err)
		}
	}
}
