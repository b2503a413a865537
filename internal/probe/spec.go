package probe

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Kind is what a probe does.
type Kind string

const (
	// KindHTTP is an HTTP GET of Path on the named Port: 2xx and 3xx are ready.
	KindHTTP Kind = "http"
	// KindTCP is a TCP connect to the named Port.
	KindTCP Kind = "tcp"
	// KindCommand runs Command; exit status 0 is ready.
	KindCommand Kind = "command"
)

// Kubernetes' defaults (periodSeconds 10, timeoutSeconds 1,
// successThreshold 1, failureThreshold 3, initialDelaySeconds 0), so that
// a probe written as it would be for a pod behaves the same here.
const (
	DefaultPeriod           = 10 * time.Second
	DefaultTimeout          = 1 * time.Second
	DefaultSuccessThreshold = 1
	DefaultFailureThreshold = 3
)

// Bounds that Validate enforces. A period below one second is Kubernetes'
// floor too and keeps 200 replicas at a few hundred attempts a second; an
// hour is beyond any useful readiness period. Thresholds above 1000 would
// make a replica wait hours to change state at any useful period.
const (
	MinPeriod       = time.Second
	MaxPeriod       = time.Hour
	MinTimeout      = 100 * time.Millisecond
	MaxInitialDelay = 24 * time.Hour
	MaxThreshold    = 1000
)

// Spec is one readiness probe as the configuration declares it. The
// zero durations and thresholds mean Kubernetes' defaults (WithDefaults).
type Spec struct {
	Kind    Kind
	Path    string   // KindHTTP: the request's path (and query), starting with "/"
	Port    string   // KindHTTP, KindTCP: the name of one of the pool's declared ports
	Command []string // KindCommand: argv, argv[0] an absolute path

	InitialDelay     time.Duration // no attempt before this long after the replica starts
	Period           time.Duration // between the starts of two attempts
	Timeout          time.Duration // one attempt's bound; an attempt past it failed
	SuccessThreshold int           // consecutive passes to become ready
	FailureThreshold int           // consecutive failures to stop being ready
}

// WithDefaults fills the zero timing fields with Kubernetes' defaults.
func (s Spec) WithDefaults() Spec {
	if s.Period == 0 {
		s.Period = DefaultPeriod
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	if s.SuccessThreshold == 0 {
		s.SuccessThreshold = DefaultSuccessThreshold
	}
	if s.FailureThreshold == 0 {
		s.FailureThreshold = DefaultFailureThreshold
	}
	return s
}

// Validate checks s (after WithDefaults) against the pool's declared port
// names. prefix names the table in errors (for example
// `pool "web": readiness`); every error names the key at fault, in the
// configuration's spelling.
func (s Spec) Validate(prefix string, declaredPorts []string) error {
	if err := s.validateKind(declaredPorts); err != nil {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	if err := s.validateTiming(); err != nil {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	return nil
}

func (s Spec) validateKind(declaredPorts []string) error {
	switch s.Kind {
	case KindHTTP:
		if !strings.HasPrefix(s.Path, "/") {
			return fmt.Errorf("path = %q: must start with \"/\"", s.Path)
		}
		if strings.ContainsAny(s.Path, " \t\r\n#") {
			return fmt.Errorf("path = %q: must not contain spaces, control characters or a fragment", s.Path)
		}
		return checkPort(s.Port, declaredPorts)
	case KindTCP:
		return checkPort(s.Port, declaredPorts)
	case KindCommand:
		if len(s.Command) == 0 || !strings.HasPrefix(s.Command[0], "/") {
			return fmt.Errorf("command = %q: must be a list whose first element is an absolute path", s.Command)
		}
		return nil
	case "":
		return fmt.Errorf("kind: missing; want %q, %q or %q", KindHTTP, KindTCP, KindCommand)
	}
	return fmt.Errorf("kind = %q: unknown; want %q, %q or %q", s.Kind, KindHTTP, KindTCP, KindCommand)
}

func checkPort(name string, declared []string) error {
	if name == "" {
		return fmt.Errorf("port: missing; name one of the pool's ports %q", declared)
	}
	if !slices.Contains(declared, name) {
		return fmt.Errorf("port = %q: not declared in the pool's ports %q", name, declared)
	}
	return nil
}

func (s Spec) validateTiming() error {
	switch {
	case s.Period < MinPeriod || s.Period > MaxPeriod:
		return fmt.Errorf("period_sec = %v: must be between %v and %v", s.Period.Seconds(), MinPeriod.Seconds(), MaxPeriod.Seconds())
	case s.Timeout < MinTimeout:
		return fmt.Errorf("timeout_sec = %v: must be at least %v", s.Timeout.Seconds(), MinTimeout.Seconds())
	case s.Timeout > s.Period:
		// One attempt per target at a time: an attempt that could outlast
		// the period would make the next one wait or overlap. Equal is
		// fine, and is what the defaults give with period_sec = 1.
		return fmt.Errorf("timeout_sec = %v: must not be longer than period_sec (%v)", s.Timeout.Seconds(), s.Period.Seconds())
	case s.InitialDelay < 0 || s.InitialDelay > MaxInitialDelay:
		return fmt.Errorf("initial_delay_sec = %v: must be between 0 and %v", s.InitialDelay.Seconds(), MaxInitialDelay.Seconds())
	case s.SuccessThreshold < 1 || s.SuccessThreshold > MaxThreshold:
		return fmt.Errorf("success_threshold = %d: must be between 1 and %d", s.SuccessThreshold, MaxThreshold)
	case s.FailureThreshold < 1 || s.FailureThreshold > MaxThreshold:
		return fmt.Errorf("failure_threshold = %d: must be between 1 and %d", s.FailureThreshold, MaxThreshold)
	}
	return nil
}
