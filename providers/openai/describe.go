package openai

import (
	"net"
	"strconv"
)

// ProviderName returns "openai", the name the OpenTelemetry GenAI
// conventions give this API (gen_ai.provider.name), whatever server
// answers it: a compatible server speaks the same protocol.
func (p *Provider) ProviderName() string { return "openai" }

// ServerAddress returns the host and port requests go to, the port
// defaulted from the scheme when the base URL names none. The base URL's
// path, query and user information are never part of it.
func (p *Provider) ServerAddress() (host string, port int) {
	u := p.s.baseURL
	host = u.Hostname()
	if ps := u.Port(); ps != "" {
		port, _ = strconv.Atoi(ps)
	} else if u.Scheme == "https" {
		port = 443
	} else {
		port = 80
	}
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	return host, port
}

// RequestParams returns the sampling parameters every request carries:
// the temperature (ok false when none is sent) and the output token limit
// (0 when none is sent).
func (p *Provider) RequestParams() (temperature float64, ok bool, maxTokens int64) {
	return p.s.temperature, p.s.hasTemperature, p.s.maxTokens
}
