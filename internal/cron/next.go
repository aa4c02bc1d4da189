package cron

import (
	"math/bits"
	"time"
)

// maxSearchDays bounds the day-by-day search of Next: the Gregorian calendar repeats
// every 400 years (146,097 days), so a schedule that fires at all fires within that.
const maxSearchDays = 146097 + 366

// Next returns the first fire time strictly after the instant after, computed in the
// wall clock of loc (nil means UTC), or the zero time if the schedule never fires
// (Fires() == false). The result is in loc; fire times are whole minutes.
//
// Daylight-saving transitions: a wall time that occurs twice fires once, at its first
// occurrence; a wall time skipped by a jump forward fires at the instant time.Date
// gives it moved past the jump: 02:30 on a day whose 02:00 jumps to 03:00 fires at 03:30.
func (s *Schedule) Next(after time.Time, loc *time.Location) time.Time {
	if !s.fires {
		return time.Time{}
	}
	if loc == nil {
		loc = time.UTC
	}
	w := after.In(loc)
	c := wall{y: w.Year(), m: int(w.Month()), d: w.Day(), h: w.Hour(), mi: w.Minute()}
	// A repeated (fall-back) hour can make up to its length of candidates map before
	// after; allow for a generous number of them.
	for i := 0; i < 10000; i++ {
		var ok bool
		if c, ok = s.nextWall(c); !ok {
			return time.Time{}
		}
		t := wallTime(c, loc)
		if t.After(after) {
			return t
		}
	}
	return time.Time{}
}

// wallTime is the instant of wall time c in loc. A wall time skipped by a jump forward
// (which time.Date maps to an earlier wall time) is moved after the jump by the same
// amount: 02:30 on a day whose 02:00 jumps to 03:00 becomes 03:30.
func wallTime(c wall, loc *time.Location) time.Time {
	t := time.Date(c.y, time.Month(c.m), c.d, c.h, c.mi, 0, 0, loc)
	if loc == time.UTC {
		return t
	}
	want := time.Date(c.y, time.Month(c.m), c.d, c.h, c.mi, 0, 0, time.UTC)
	y, m, d := t.Date()
	got := time.Date(y, m, d, t.Hour(), t.Minute(), 0, 0, time.UTC)
	if diff := want.Sub(got); diff > 0 {
		t = t.Add(diff)
	}
	return t
}

// wall is a civil date and time of day to the minute.
type wall struct{ y, m, d, h, mi int }

// nextWall returns the first matching wall minute strictly after c.
func (s *Schedule) nextWall(c wall) (wall, bool) {
	if s.monthOK(c.m) && s.dayOK(c.y, c.m, c.d) {
		if h, mi, ok := s.nextTime(c.h, c.mi+1); ok {
			return wall{c.y, c.m, c.d, h, mi}, true
		}
	}
	h, mi, _ := s.nextTime(0, 0)
	y, m, d := c.y, c.m, c.d
	for i := 0; i < maxSearchDays; i++ {
		d++
		if d > daysIn(y, m) {
			d = 1
			if m++; m > 12 {
				m = 1
				y++
			}
		}
		if !s.monthOK(m) {
			// jump to the last day of this month; the next step moves to the 1st of the next.
			d = daysIn(y, m)
			continue
		}
		if s.dayOK(y, m, d) {
			return wall{y, m, d, h, mi}, true
		}
	}
	return wall{}, false
}

// nextTime returns the first matching (hour, minute) at or after (h, mi) on one day;
// mi may be 60.
func (s *Schedule) nextTime(h, mi int) (int, int, bool) {
	for ; h < 24; h, mi = h+1, 0 {
		if s.hours&(1<<uint(h)) == 0 || mi > 59 {
			continue
		}
		rest := s.minutes >> uint(mi) << uint(mi)
		if rest != 0 {
			return h, bits.TrailingZeros64(rest), true
		}
	}
	return 0, 0, false
}

func (s *Schedule) monthOK(m int) bool { return s.months&(1<<uint(m)) != 0 }

func (s *Schedule) dayOK(y, m, d int) bool {
	dim := daysIn(y, m)
	wd := int(time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC).Weekday())
	return s.dayMatches(d, dim, wd)
}

// dayMatches decides the day fields for day d of a month of dim days, d falling on
// weekday wd (0 = Sunday). It depends on nothing else, which is what Fires relies on.
func (s *Schedule) dayMatches(d, dim, wd int) bool {
	switch {
	case s.dom == domStar && s.dow == dowStar:
		return true
	case s.dom == domStar:
		return s.dowMatches(d, dim, wd)
	case s.dow == dowStar:
		return s.domMatches(d, dim, wd)
	default:
		// Cloudflare (like Vixie cron) ORs the two day fields when both are restricted.
		return s.domMatches(d, dim, wd) || s.dowMatches(d, dim, wd)
	}
}

func (s *Schedule) domMatches(d, dim, wd int) bool {
	switch s.dom {
	case domSet:
		return s.domBits&(1<<uint(d)) != 0
	case domLast:
		return d == dim-s.domOffset
	case domLastWeekday:
		t := dim - s.domOffset
		return t >= 1 && d == nearestWeekday(t, dim, weekdayOf(t, d, wd))
	case domNearest:
		// A day beyond the month (31W in April) matches nothing that month, as with
		// Cloudflare's parser.
		t := s.domOffset
		return t <= dim && d == nearestWeekday(t, dim, weekdayOf(t, d, wd))
	}
	return true
}

// weekdayOf is the weekday of day t of the month given that day d falls on wd.
func weekdayOf(t, d, wd int) int { return ((wd+t-d)%7 + 7) % 7 }

// nearestWeekday is the weekday (Mon-Fri) nearest to day t of a month of dim days,
// never leaving the month: Saturday the 1st moves to Monday the 3rd, Sunday the last
// day to Friday, other Saturdays back to Friday and Sundays on to Monday.
func nearestWeekday(t, dim, wdT int) int {
	switch wdT {
	case 6: // Saturday
		if t == 1 {
			return 3
		}
		return t - 1
	case 0: // Sunday
		if t == dim {
			return t - 2
		}
		return t + 1
	}
	return t
}

func (s *Schedule) dowMatches(d, dim, wd int) bool {
	switch s.dow {
	case dowSet:
		return s.dowBits&(1<<uint(wd)) != 0
	case dowLast:
		return wd == s.dowDay && d+7 > dim
	case dowNth:
		return wd == s.dowDay && (d-1)/7+1 == s.dowNth
	}
	return true
}

// computeFires checks every (month, month length, weekday of the 1st, day): whether a
// day matches depends only on those, and every combination occurs in the 400-year
// Gregorian cycle (February has 28 or 29 days).
func (s *Schedule) computeFires() bool {
	for m := 1; m <= 12; m++ {
		if !s.monthOK(m) {
			continue
		}
		lengths := []int{daysIn(2001, m)}
		if m == 2 {
			lengths = []int{28, 29}
		}
		for _, dim := range lengths {
			for first := 0; first < 7; first++ {
				for d := 1; d <= dim; d++ {
					if s.dayMatches(d, dim, (first+d-1)%7) {
						return true
					}
				}
			}
		}
	}
	return false
}

func daysIn(y, m int) int {
	switch m {
	case 4, 6, 9, 11:
		return 30
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	}
	return 31
}
