package workload

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ServiceModel maps an Azure LLM trace row to a service time:
// Base + PerGenerated·GeneratedTokens + PerContext·ContextTokens seconds.
type ServiceModel struct {
	Base, PerGenerated, PerContext float64
}

// DefaultService is the mapping, 1 s + 0.05 s per generated token.
var DefaultService = ServiceModel{Base: 1, PerGenerated: 0.05}

func (s ServiceModel) String() string {
	out := strconv.FormatFloat(s.Base, 'g', -1, 64)
	if s.PerGenerated != 0 {
		out += " + " + strconv.FormatFloat(s.PerGenerated, 'g', -1, 64) + "*GeneratedTokens"
	}
	if s.PerContext != 0 {
		out += " + " + strconv.FormatFloat(s.PerContext, 'g', -1, 64) + "*ContextTokens"
	}
	return out
}

// ParseService reads a service expression: a sum of terms, each a number,
// or a number times GeneratedTokens or ContextTokens (in either order), as
// in "1 + 0.05*GeneratedTokens".
func ParseService(expr string) (ServiceModel, error) {
	var s ServiceModel
	if strings.TrimSpace(expr) == "" {
		return s, errors.New("empty service expression")
	}
	for _, term := range strings.Split(expr, "+") {
		term = strings.TrimSpace(term)
		factors := strings.Split(term, "*")
		coef, name := 1.0, ""
		for _, f := range factors {
			f = strings.TrimSpace(f)
			if v, err := strconv.ParseFloat(f, 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
				coef *= v
				continue
			}
			switch {
			case name != "":
				return s, fmt.Errorf("term %q: at most one of GeneratedTokens and ContextTokens per term", term)
			case strings.EqualFold(f, "GeneratedTokens"), strings.EqualFold(f, "ContextTokens"):
				name = strings.ToLower(f)
			default:
				return s, fmt.Errorf("term %q: %q is neither a number nor GeneratedTokens or ContextTokens", term, f)
			}
		}
		switch name {
		case "":
			s.Base += coef
		case "generatedtokens":
			s.PerGenerated += coef
		default:
			s.PerContext += coef
		}
	}
	return s, nil
}

// ReadTrace reads a job trace: CSV with a header, either arrival,service
// (seconds) or the Azure LLM format TIMESTAMP,ContextTokens,GeneratedTokens,
// whose service time svc gives. Arrivals are made relative to the first job
// and sorted (stably: equal arrivals keep their order). Errors name the line.
func ReadTrace(r io.Reader, svc ServiceModel) ([]Job, error) {
	cr := csv.NewReader(r)
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("trace is empty: want a header, arrival,service or TIMESTAMP,ContextTokens,GeneratedTokens")
	}
	if err != nil {
		return nil, fmt.Errorf("read trace: %w", err)
	}
	row, err := traceRow(header, svc)
	if err != nil {
		return nil, err
	}
	var jobs []Job
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read trace: %w", err)
		}
		line, _ := cr.FieldPos(0)
		j, err := row(rec)
		if err != nil {
			return nil, fmt.Errorf("trace line %d: %w", line, err)
		}
		jobs = append(jobs, j)
	}
	slices.SortStableFunc(jobs, func(a, b Job) int { return cmp.Compare(a.Arrival, b.Arrival) })
	if len(jobs) > 0 {
		t0 := jobs[0].Arrival
		for i := range jobs {
			jobs[i].Arrival -= t0
		}
	}
	return jobs, nil
}

// traceRow picks the reader of one row from the header: the simulator's own
// arrival,service, or the Azure LLM inference traces' columns.
func traceRow(header []string, svc ServiceModel) (func([]string) (Job, error), error) {
	cols := map[string]int{}
	for i, h := range header {
		cols[strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))] = i
	}
	has := func(names ...string) bool {
		for _, n := range names {
			if _, ok := cols[n]; !ok {
				return false
			}
		}
		return true
	}
	switch {
	case has("arrival", "service"):
		return func(rec []string) (Job, error) {
			a, err := number(rec[cols["arrival"]], "arrival")
			if err != nil {
				return Job{}, err
			}
			s, err := number(rec[cols["service"]], "service")
			if err == nil && s < 0 {
				err = fmt.Errorf("service %g must be >= 0", s)
			}
			return Job{Arrival: a, Service: s}, err
		}, nil
	case has("timestamp", "contexttokens", "generatedtokens"):
		return azureRow(cols, svc), nil
	}
	return nil, fmt.Errorf("trace header %q: want arrival,service or TIMESTAMP,ContextTokens,GeneratedTokens", strings.Join(header, ","))
}

// azureRow reads a row of the Azure LLM inference traces (CC-BY 4.0): the
// service time comes from the token counts through svc.
func azureRow(cols map[string]int, svc ServiceModel) func([]string) (Job, error) {
	// Seconds from the first row's timestamp: a float of Unix seconds
	// would keep only about a tenth of a microsecond.
	var base time.Time
	return func(rec []string) (Job, error) {
		ts, err := time.Parse("2006-01-02 15:04:05.999999999", strings.TrimSpace(rec[cols["timestamp"]]))
		if err != nil {
			return Job{}, fmt.Errorf("TIMESTAMP %q: want YYYY-MM-DD HH:MM:SS[.fraction]", rec[cols["timestamp"]])
		}
		ctx, err := number(rec[cols["contexttokens"]], "ContextTokens")
		if err != nil {
			return Job{}, err
		}
		gen, err := number(rec[cols["generatedtokens"]], "GeneratedTokens")
		if err != nil {
			return Job{}, err
		}
		s := svc.Base + svc.PerGenerated*gen + svc.PerContext*ctx
		if s < 0 {
			return Job{}, fmt.Errorf("service time %g (from %s) must be >= 0", s, svc)
		}
		if base.IsZero() {
			base = ts
		}
		return Job{Arrival: ts.Sub(base).Seconds(), Service: s}, nil
	}
}

func number(s, col string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%s %q is not a number", col, s)
	}
	return v, nil
}

// WriteTrace writes jobs as arrival,service CSV.
func WriteTrace(w io.Writer, jobs []Job) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"arrival", "service"}); err != nil {
		return err
	}
	for _, j := range jobs {
		if err := cw.Write([]string{strconv.FormatFloat(j.Arrival, 'f', 3, 64), strconv.FormatFloat(j.Service, 'f', 3, 64)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
