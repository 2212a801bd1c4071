package openai

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/model"
)

// Defaults and limits of Config.
const (
	DefaultBaseURL          = "https://api.openai.com/v1"
	DefaultTimeout          = 10 * time.Minute
	DefaultMaxAttempts      = 3
	DefaultMaxRetryWait     = 30 * time.Second
	DefaultMaxResponseBytes = 64 << 20

	// MaxAttemptsLimit bounds Config.MaxAttempts.
	MaxAttemptsLimit = 10
	// MaxAPIKeyBytes bounds Config.APIKey.
	MaxAPIKeyBytes = 4 << 10
)

// Environment variables ConfigFromEnv reads.
const (
	EnvAPIKey  = "OPENAI_API_KEY"
	EnvBaseURL = "OPENAI_BASE_URL"
)

// Config is the input to New. The zero value of every optional field means
// its default.
type Config struct {
	// APIKey is sent as a bearer token. It is required for the default
	// base URL and optional for a compatible server that needs none.
	APIKey string `json:"-"`
	// BaseURL is the API root, e.g. "http://localhost:11434/v1" for
	// Ollama or "http://localhost:8000/v1" for vLLM; the request goes to
	// BaseURL + "/chat/completions". Empty means DefaultBaseURL.
	BaseURL string
	// Timeout bounds one attempt: from sending the request to the end of
	// the stream. Zero means DefaultTimeout.
	Timeout time.Duration
	// Temperature is sent when set: 0..2.
	Temperature *float64
	// MaxOutputTokens, when positive, limits the tokens the model may
	// generate (max_completion_tokens).
	MaxOutputTokens int
	// LegacyMaxTokens sends MaxOutputTokens as max_tokens, for older
	// compatible servers that do not know max_completion_tokens.
	LegacyMaxTokens bool
	// HTTPClient sends the requests. Nil means a client of its own with a
	// clone of http.DefaultTransport. Its Timeout must be zero or long
	// enough for a whole stream; Config.Timeout is the better knob.
	HTTPClient *http.Client

	// MaxAttempts is the number of attempts Stream makes before the first
	// chunk, retries included: 1..MaxAttemptsLimit, zero means
	// DefaultMaxAttempts, and 1 turns retries off.
	MaxAttempts int
	// MaxRetryWait is the longest wait Stream spends before a retry. A
	// server asking for more ends the retries. Zero means
	// DefaultMaxRetryWait; at most model.MaxRetryAfter.
	MaxRetryWait time.Duration
	// MaxResponseBytes bounds the bytes read from one response. Zero
	// means DefaultMaxResponseBytes.
	MaxResponseBytes int64

	// Sleep waits d or until ctx is done, returning ctx's error then. Nil
	// means a timer. Tests inject it to observe retry waits.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now returns the current time, for Retry-After dates. Nil means
	// time.Now.
	Now func() time.Time
}

// ConfigFromEnv returns a Config with APIKey and BaseURL read through
// getenv (normally os.Getenv) from OPENAI_API_KEY and OPENAI_BASE_URL. The
// other fields stay zero, for the caller to fill from its own
// configuration.
func ConfigFromEnv(getenv func(string) string) Config {
	if getenv == nil {
		return Config{}
	}
	return Config{APIKey: getenv(EnvAPIKey), BaseURL: getenv(EnvBaseURL)}
}

// String describes c without the API key (it says only whether one is set)
// and with any password in the base URL redacted.
func (c Config) String() string {
	s := "openai.Config{BaseURL: " + redactURL(c.BaseURL) + ", APIKey: "
	if c.APIKey == "" {
		s += "unset"
	} else {
		s += "[redacted]"
	}
	s += ", Timeout: " + c.Timeout.String()
	if c.Temperature != nil {
		s += ", Temperature: " + strconv.FormatFloat(*c.Temperature, 'g', -1, 64)
	}
	if c.MaxOutputTokens != 0 {
		s += ", MaxOutputTokens: " + strconv.Itoa(c.MaxOutputTokens)
	}
	return s + "}"
}

// Format makes every fmt verb (%v, %+v, %#v, %s, ...) print String, so a
// logged Config never shows the key.
func (c Config) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// LogValue makes slog print String.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// redactURL returns u with any password replaced; an unparsable URL is
// hidden entirely because it might hold a credential in any place.
func redactURL(u string) string {
	if u == "" {
		return `""`
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return "[unparsable]"
	}
	return parsed.Redacted()
}

// settings is a validated Config with defaults applied.
type settings struct {
	apiKey          string
	redact          redactor // the key's forms in server text
	baseURL         *url.URL
	timeout         time.Duration
	temperature     float64
	hasTemperature  bool
	maxTokens       int64
	legacyMaxTokens bool
	client          *http.Client
	maxAttempts     int
	maxRetryWait    time.Duration
	maxBody         int64
	sleep           func(context.Context, time.Duration) error
	now             func() time.Time
}

func (c Config) validate() (settings, error) {
	s := settings{
		apiKey:          c.APIKey,
		redact:          newRedactor(c.APIKey),
		timeout:         orDefault(c.Timeout, DefaultTimeout),
		legacyMaxTokens: c.LegacyMaxTokens,
		client:          c.HTTPClient,
		maxAttempts:     orDefault(c.MaxAttempts, DefaultMaxAttempts),
		maxRetryWait:    orDefault(c.MaxRetryWait, DefaultMaxRetryWait),
		maxBody:         orDefault(c.MaxResponseBytes, DefaultMaxResponseBytes),
		sleep:           c.Sleep,
		now:             c.Now,
	}
	base := c.BaseURL
	if base == "" {
		if c.APIKey == "" {
			return settings{}, bound.Missing("openai.api_key")
		}
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return settings{}, bound.Malformedf("openai.base_url", "must be an absolute http or https URL")
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.RawFragment != "" {
		// Cut silently, a query (an api-version, a key) would never reach
		// the server; the caller must know.
		return settings{}, bound.Malformedf("openai.base_url", "must not have a query string or a fragment")
	}
	s.baseURL = u
	if err := checkKey(c.APIKey); err != nil {
		return settings{}, err
	}
	switch {
	case c.Timeout < 0:
		return settings{}, bound.Malformedf("openai.timeout", "must not be negative")
	case c.MaxOutputTokens < 0:
		return settings{}, bound.Malformedf("openai.max_output_tokens", "must not be negative")
	case c.MaxAttempts < 0:
		return settings{}, bound.Malformedf("openai.max_attempts", "must not be negative")
	case c.MaxRetryWait < 0:
		return settings{}, bound.Malformedf("openai.max_retry_wait", "must not be negative")
	case c.MaxResponseBytes < 0:
		return settings{}, bound.Malformedf("openai.max_response_bytes", "must not be negative")
	}
	if err := bound.Count("openai.max_attempts", s.maxAttempts, MaxAttemptsLimit); err != nil {
		return settings{}, err
	}
	if s.maxRetryWait > model.MaxRetryAfter {
		return settings{}, &bound.Error{Field: "openai.max_retry_wait", Rule: bound.TooLarge,
			Limit: int(model.MaxRetryAfter / time.Millisecond), Got: int(s.maxRetryWait / time.Millisecond),
			Detail: "milliseconds"}
	}
	if t := c.Temperature; t != nil {
		if math.IsNaN(*t) || *t < 0 || *t > 2 {
			return settings{}, bound.Malformedf("openai.temperature", "must be between 0 and 2")
		}
		s.temperature, s.hasTemperature = *t, true
	}
	s.maxTokens = int64(c.MaxOutputTokens)
	if s.client == nil {
		s.client = defaultClient()
	}
	if s.sleep == nil {
		s.sleep = sleep
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// checkKey keeps the key to what a header can carry, so a pasted newline
// cannot inject headers. The error never quotes the key.
func checkKey(k string) error {
	if err := bound.Bytes("openai.api_key", len(k), MaxAPIKeyBytes); err != nil {
		return err
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] > '~' {
			return bound.Malformedf("openai.api_key", "only printable ASCII without spaces is allowed")
		}
	}
	return nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// defaultClient has no overall timeout (streams are long); Config.Timeout
// bounds each attempt through its context instead.
func defaultClient() *http.Client {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		return &http.Client{Transport: t.Clone()}
	}
	return &http.Client{Transport: http.DefaultTransport}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
