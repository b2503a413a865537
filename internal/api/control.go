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
