package api

// The control socket's requests and answers (internal/control serves and
// calls them over HTTP on a Unix socket).

// StatusResponse is GET /v1/status: the `{"pools": [...]}` of
// `status --json`.
type StatusResponse struct {
	Pools []View `json:"pools"`
}

// ExplainResponse is GET /v1/pools/POOL/explain.
type ExplainResponse struct {
	Pool      string        `json:"pool"`
	Decisions []Explanation `json:"decisions"`
}

// ChangeRequest is the body of POST /v1/pools/POOL/{pause,pin,roll}.
type ChangeRequest struct {
	// ForSec bounds a pause or pin, in seconds; 0 is until resumed. At
	// most control.MaxForSec.
	ForSec  float64 `json:"for_sec,omitempty"`
	Workers *int    `json:"workers,omitempty"` // pin
	Reason  string  `json:"reason,omitempty"`  // roll
}

// ChangeResponse answers a change.
type ChangeResponse struct {
	Pool     string    `json:"pool"`
	Override *Override `json:"override"`
	Message  string    `json:"message"`
}

// ErrorResponse is the body of every 4xx and 5xx answer.
type ErrorResponse struct {
	Error string `json:"error"`
}

// ReloadResponse is the daemon's verdict on POST /v1/reload, given once a
// reload that read the configuration after the request has run. A rejected
// configuration is a verdict, answered 200 with OK false, not an error.
type ReloadResponse struct {
	OK bool `json:"ok"`
	// Changes say what the reload did, one line each ("nothing changed"
	// if nothing did).
	Changes []string `json:"changes,omitempty"`
	// Problems say why it was refused or only partly applied: one
	// "FILE: KEY: MESSAGE" each for a rejected configuration.
	Problems []string `json:"problems,omitempty"`
}
