package cron

import (
	"fmt"
	"strconv"
	"strings"
)

// Source names where the dialect's limits come from; error messages cite it.
const Source = "Cloudflare Cron Triggers dialect (https://developers.cloudflare.com/workers/configuration/cron-triggers/#supported-cron-expressions)"

// MaxLength is the longest expression accepted, in bytes: the CronSchedule CRD's
// items:MaxLength for spec.schedules.
const MaxLength = 256

// Field names as error messages and Error.Field spell them.
const (
	FieldMinute     = "minute"
	FieldHour       = "hour"
	FieldDayOfMonth = "day-of-month"
	FieldMonth      = "month"
	FieldDayOfWeek  = "day-of-week"
)

// Error is a rejected expression. Its message names the expression, the field, the
// offending text, the rule and its source, and says what to write instead when there
// is an obvious fix; the admission webhook shows it to users as is.
type Error struct {
	// Expr is the whole expression as given.
	Expr string
	// Field is one of the Field* names, or "" when the expression as a whole is wrong
	// (field count, macros, whitespace, never firing).
	Field string
	// Text is the offending part of the field ("" when Field is "").
	Text string
	// Reason says what is wrong and what to write instead.
	Reason string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("cron expression %q: %s", e.Expr, e.Reason)
	}
	return fmt.Sprintf("cron expression %q: %s field %q: %s", e.Expr, e.Field, e.Text, e.Reason)
}

type fieldSpec struct {
	name     string
	min, max int
	names    []string // names[i] is value min+i; nil when the field has no names
}

var (
	minuteSpec = fieldSpec{name: FieldMinute, min: 0, max: 59}
	hourSpec   = fieldSpec{name: FieldHour, min: 0, max: 23}
	domSpec    = fieldSpec{name: FieldDayOfMonth, min: 1, max: 31}
	monthSpec  = fieldSpec{name: FieldMonth, min: 1, max: 12,
		names: []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}}
	dowSpec = fieldSpec{name: FieldDayOfWeek, min: 1, max: 7,
		names: []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}}
)

func (f *fieldSpec) rangeText() string {
	s := fmt.Sprintf("%d-%d", f.min, f.max)
	if f.names != nil {
		s += " or " + f.names[0] + "-" + f.names[len(f.names)-1]
	}
	return s
}

// domKind and dowKind say how a day field matches.
type domKind uint8

const (
	domStar        domKind = iota // bare '*'
	domSet                        // values, ranges, steps: bit d of domBits
	domLast                       // L, L-n: the (n)th day before the last
	domLastWeekday                // LW, L-nW: the weekday nearest to that day
	domNearest                    // nW: the weekday nearest to day n
)

type dowKind uint8

const (
	dowStar dowKind = iota // bare '*'
	dowSet                 // bit w (0 = Sunday) of dowBits
	dowLast                // nL: last weekday dowDay of the month
	dowNth                 // n#k: the dowNth-th weekday dowDay of the month
)

// Schedule is a parsed Cloudflare-dialect cron expression. It is immutable and safe
// for concurrent use.
type Schedule struct {
	expr    string
	minutes uint64 // bit m, 0-59
	hours   uint32 // bit h, 0-23
	months  uint16 // bit m, 1-12

	dom       domKind
	domBits   uint32 // domSet: bit d, 1-31
	domOffset int    // domLast/domLastWeekday: n of L-n (0 for L, LW); domNearest: the day

	dow     dowKind
	dowBits uint8 // dowSet: bit w, 0 = Sunday .. 6 = Saturday
	dowDay  int   // dowLast/dowNth: weekday, 0 = Sunday
	dowNth  int   // dowNth: 1-5

	fires bool
}

// String returns the expression exactly as it was given to Parse.
func (s *Schedule) String() string { return s.expr }

// Fires reports whether the schedule fires at least once (in some year of the
// 400-year Gregorian cycle). Next returns the zero time for a schedule that never
// fires, e.g. "0 0 30 2 *" (February 30th) or "0 0 31 4 *".
func (s *Schedule) Fires() bool { return s.fires }

// Validate is the admission check used by the webhook for CronSchedule and Workflow
// spec.schedules entries: Parse, plus the rule that the expression must fire at least
// once. It returns the parsed schedule, or an *Error that names the field and says why.
func Validate(expr string) (*Schedule, error) {
	s, err := Parse(expr)
	if err != nil {
		return nil, err
	}
	if !s.fires {
		return nil, &Error{Expr: expr, Reason: "can never fire: no month it selects has a day matching its day-of-month" +
			" and day-of-week fields (e.g. February 30th or April 31st); Cloudflare accepts it but it never runs"}
	}
	return s, nil
}

// Parse parses a Cloudflare-dialect cron expression (see the package comment for the
// grammar). It returns an *Error for anything Cloudflare's parser rejects, and for
// wrap-around ranges and '*' inside lists, which it accepts but evaluates surprisingly.
// An expression that parses but never fires is returned with Fires() == false.
func Parse(expr string) (*Schedule, error) {
	fail := func(reason string, args ...any) (*Schedule, error) {
		return nil, &Error{Expr: expr, Reason: fmt.Sprintf(reason, args...)}
	}
	if len(expr) > MaxLength {
		return fail("is %d bytes long; at most %d are allowed (CronSchedule spec.schedules items maxLength)", len(expr), MaxLength)
	}
	if strings.TrimSpace(expr) == "" {
		return fail("is empty; a %s expression has 5 fields: minute hour day-of-month month day-of-week", Source)
	}
	if strings.HasPrefix(strings.TrimSpace(expr), "@") {
		return fail("macros such as @daily are not part of the %s; write five fields instead%s", Source, macroHint(strings.TrimSpace(expr)))
	}
	if strings.TrimLeft(expr, " \t") != expr || strings.TrimRight(expr, " \t") != expr {
		return fail("has leading or trailing whitespace, which Cloudflare's parser rejects; remove it")
	}
	fields := strings.FieldsFunc(expr, func(r rune) bool { return r == ' ' || r == '\t' })
	if len(fields) != 5 {
		extra := ""
		if len(fields) > 5 {
			extra = "; seconds and year fields are not supported (Quartz and some other cron flavours have them)"
		}
		return fail("has %d fields; the %s has exactly 5: minute hour day-of-month month day-of-week%s", len(fields), Source, extra)
	}
	if strings.Contains(expr, "?") {
		for i, f := range fields {
			if strings.Contains(f, "?") {
				name := []string{FieldMinute, FieldHour, FieldDayOfMonth, FieldMonth, FieldDayOfWeek}[i]
				return nil, &Error{Expr: expr, Field: name, Text: f, Reason: "'?' (Quartz's \"no specific value\") is not supported by Cloudflare's parser; write * instead"}
			}
		}
	}
	s := &Schedule{expr: expr}
	p := parser{expr: expr}
	var bits uint64
	var err error
	if bits, err = p.list(&minuteSpec, fields[0]); err != nil {
		return nil, err
	}
	s.minutes = bits
	if bits, err = p.list(&hourSpec, fields[1]); err != nil {
		return nil, err
	}
	s.hours = uint32(bits)
	if err = p.dayOfMonth(s, fields[2]); err != nil {
		return nil, err
	}
	if bits, err = p.list(&monthSpec, fields[3]); err != nil {
		return nil, err
	}
	s.months = uint16(bits)
	if err = p.dayOfWeek(s, fields[4]); err != nil {
		return nil, err
	}
	s.fires = s.computeFires()
	return s, nil
}

func macroHint(m string) string {
	switch strings.ToLower(m) {
	case "@yearly", "@annually":
		return ": @yearly is 0 0 1 1 *"
	case "@monthly":
		return ": @monthly is 0 0 1 * *"
	case "@weekly":
		return ": @weekly is 0 0 * * 1 (day of week 1 = Sunday)"
	case "@daily", "@midnight":
		return ": @daily is 0 0 * * *"
	case "@hourly":
		return ": @hourly is 0 * * * *"
	}
	return ""
}

type parser struct{ expr string }

func (p *parser) errf(f *fieldSpec, text, reason string, args ...any) error {
	return &Error{Expr: p.expr, Field: f.name, Text: text, Reason: fmt.Sprintf(reason, args...)}
}

// value parses a number or (for month and day of week) a three-letter name.
func (p *parser) value(f *fieldSpec, field, tok string) (int, error) {
	if tok == "" {
		return 0, p.errf(f, field, "a value is missing (empty list item, range end or step)")
	}
	if tok == "*" {
		return 0, p.errf(f, field, "'*' can only be the whole field or the start of a step such as */5; Cloudflare reads a '*' inside a list or range as the field's minimum, so it is rejected here; write the values explicitly")
	}
	if isDigits(tok) {
		n, err := strconv.Atoi(tok)
		if err != nil || len(tok) > 4 {
			return 0, p.errf(f, field, "%s is out of range %s (%s)", tok, f.rangeText(), Source)
		}
		if n < f.min || n > f.max {
			if f == &dowSpec && n == 0 {
				return 0, p.errf(f, field, "0 is out of range 1-7: Cloudflare numbers the days of the week 1-7 with 1 = Sunday (%s; the API answers \"invalid cron string [code: 10100]\"); write 1 or SUN for Sunday", Source)
			}
			return 0, p.errf(f, field, "%d is out of range %s (%s)", n, f.rangeText(), Source)
		}
		return n, nil
	}
	if f.names != nil {
		up := strings.ToUpper(tok)
		for i, n := range f.names {
			if up == n {
				return f.min + i, nil
			}
		}
		return 0, p.errf(f, field, "%q is not a %s: use %s (three-letter names, any case)", tok, f.name, f.rangeText())
	}
	return 0, p.errf(f, field, "%q is not a number in %s", tok, f.rangeText())
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// step parses the n of '/n': 1 to max-min of the field (Cloudflare's limit).
func (p *parser) step(f *fieldSpec, field, tok string) (int, error) {
	hi := f.max - f.min
	if !isDigits(tok) {
		return 0, p.errf(f, field, "step %q must be a number from 1 to %d (%s)", tok, hi, Source)
	}
	n, err := strconv.Atoi(tok)
	if err != nil || len(tok) > 4 || n < 1 || n > hi {
		return 0, p.errf(f, field, "step /%s is out of range: steps of the %s field are 1-%d (%s)", tok, f.name, hi, Source)
	}
	return n, nil
}

// list parses '*' or a comma list of values, ranges and steps into a bit set (bit v
// for value v).
func (p *parser) list(f *fieldSpec, field string) (uint64, error) {
	if field == "*" {
		var all uint64
		for v := f.min; v <= f.max; v++ {
			all |= 1 << uint(v)
		}
		return all, nil
	}
	var bits uint64
	for i, item := range strings.Split(field, ",") {
		b, err := p.item(f, field, item, i == 0)
		if err != nil {
			return 0, err
		}
		bits |= b
	}
	return bits, nil
}

func (p *parser) item(f *fieldSpec, field, item string, first bool) (uint64, error) {
	if item == "" {
		return 0, p.errf(f, field, "empty list item (a stray comma)")
	}
	body, stepTok, hasStep := strings.Cut(item, "/")
	start, end := f.min, f.max
	if body == "*" {
		if !hasStep {
			return 0, p.errf(f, field, "'*' cannot be combined with other values in a list; write * alone or list the values")
		}
	} else {
		a, b, isRange := strings.Cut(body, "-")
		var err error
		if start, err = p.value(f, field, a); err != nil {
			return 0, err
		}
		if isRange {
			if b == "" {
				return 0, p.errf(f, field, "range %q has no end; write a-b", item)
			}
			if end, err = p.value(f, field, b); err != nil {
				return 0, err
			}
			if start > end {
				return 0, p.errf(f, field, "range %s wraps around; Cloudflare's parser accepts it but also fires one value before %s, so it is rejected here: write %s", body, a, wrapHint(f, a, b))
			}
		} else if !hasStep {
			end = start
		}
	}
	step := 1
	if hasStep {
		var err error
		if step, err = p.step(f, field, stepTok); err != nil {
			return 0, err
		}
	}
	var bits uint64
	for v := start; v <= end; v += step {
		bits |= 1 << uint(v)
	}
	return bits, nil
}

// wrapHint rewrites a wrap-around range a-b as the two ranges a-max,min-b, using names
// when the user did.
func wrapHint(f *fieldSpec, a, b string) string {
	hi, lo := strconv.Itoa(f.max), strconv.Itoa(f.min)
	if f.names != nil && !isDigits(a) {
		hi = f.names[len(f.names)-1]
	}
	if f.names != nil && !isDigits(b) {
		lo = f.names[0]
	}
	first := a + "-" + hi
	if a == hi {
		first = a
	}
	second := lo + "-" + b
	if b == lo {
		second = b
	}
	return first + "," + second
}

func (p *parser) dayOfMonth(s *Schedule, field string) error {
	f := &domSpec
	switch {
	case field == "*":
		s.dom = domStar
		return nil
	case strings.ContainsAny(field, "lw"):
		return p.errf(f, field, "L and W must be upper case (%s)", Source)
	case !strings.ContainsAny(field, "LW"):
		bits, err := p.list(f, field)
		s.dom, s.domBits = domSet, uint32(bits)
		return err
	case strings.Contains(field, ","):
		return p.errf(f, field, "L and W cannot be used in a list: Cloudflare accepts them only as the whole day-of-month field (L, LW, L-n, L-nW or nW)")
	}
	switch {
	case field == "L":
		s.dom, s.domOffset = domLast, 0
		return nil
	case field == "LW":
		s.dom, s.domOffset = domLastWeekday, 0
		return nil
	case strings.HasPrefix(field, "L-"):
		tok, weekday := strings.CutSuffix(field[2:], "W")
		n, err := strconv.Atoi(tok)
		if !isDigits(tok) || err != nil || len(tok) > 4 || n < 1 || n > 30 {
			return p.errf(f, field, "the offset of L-n must be a number from 1 to 30 (%s)", Source)
		}
		s.dom, s.domOffset = domLast, n
		if weekday {
			s.dom = domLastWeekday
		}
		return nil
	case strings.HasSuffix(field, "W") && isDigits(field[:len(field)-1]):
		tok := field[:len(field)-1]
		n, err := strconv.Atoi(tok)
		if err != nil || len(tok) > 4 || n < 1 || n > 31 {
			return p.errf(f, field, "the day of nW must be from 1 to 31 (%s)", Source)
		}
		s.dom, s.domOffset = domNearest, n
		return nil
	case field == "W":
		return p.errf(f, field, "W needs a day: write nW (the weekday nearest to day n) or LW (the last weekday)")
	}
	return p.errf(f, field, "not a day-of-month form: use values, ranges and steps, or exactly one of L, LW, L-n, L-nW, nW (%s)", Source)
}

func (p *parser) dayOfWeek(s *Schedule, field string) error {
	f := &dowSpec
	switch {
	case field == "*":
		s.dow = dowStar
		return nil
	case !strings.ContainsAny(field, "L#"):
		bits, err := p.list(f, field)
		// values are 1-7 with 1 = Sunday; store bit 0 = Sunday.
		s.dow, s.dowBits = dowSet, uint8(bits>>1)
		return err
	case strings.Contains(field, ","):
		return p.errf(f, field, "nL and n#k cannot be used in a list: Cloudflare accepts them only as the whole day-of-week field")
	case field == "L":
		// Cloudflare's parser reads a lone L as Saturday, the last day of the week.
		s.dow, s.dowBits = dowSet, 1<<6
		return nil
	}
	if day, nth, ok := strings.Cut(field, "#"); ok {
		v, err := p.value(f, field, day)
		if err != nil {
			return err
		}
		n, err := strconv.Atoi(nth)
		if !isDigits(nth) || err != nil || len(nth) > 4 || n < 1 || n > 5 {
			return p.errf(f, field, "the k of n#k must be from 1 to 5 (no month has a 6th occurrence of a weekday) (%s)", Source)
		}
		s.dow, s.dowDay, s.dowNth = dowNth, v-1, n
		return nil
	}
	if day, ok := strings.CutSuffix(field, "L"); ok && !strings.Contains(day, "L") {
		v, err := p.value(f, field, day)
		if err != nil {
			return err
		}
		s.dow, s.dowDay = dowLast, v-1
		return nil
	}
	return p.errf(f, field, "not a day-of-week form: use values, ranges and steps, or exactly one of nL (last weekday n of the month) or n#k (%s)", Source)
}
