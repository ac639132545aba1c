package redisrate

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Calendar quotas (Limit.Calendar): "100,000 a day, reset at midnight
// Pacific time", "a billion tokens per calendar month". The scripts know
// only periods; fixed_window serves a calendar window when each window
// has a key of its own and a period that outlasts it:
//
//   - the key is the caller's with the window's name appended
//     (":2026-12-07", ":2026-W49", ":2026-12"), chosen on the Limiter's
//     clock, so a new window starts with an empty key at its first
//     instant, whatever its length (23 or 25 hours on the days daylight
//     saving time starts or ends, 28 to 31 days for a month);
//   - period_ms is the window's length plus calendarMargin: fixed_window's
//     window starts at the key's first request, at or after the calendar
//     window's start, so it lasts past the calendar window's end, and every
//     request of the calendar window counts in it, even from callers whose
//     clocks disagree by up to calendarMargin. The key expires at most one
//     window and the margin after the calendar window ends.
//
// The Limiter then answers RetryAfter and ResetAfter to the next window's
// start on its own clock (calendarResult): the script's own waits run to
// the end of its longer period.

// calendarMargin is how much longer than its calendar window a calendar
// key's fixed window lasts: the disagreement between the clocks of the
// processes that share a calendar limit (and Redis's TIME) that it
// tolerates without opening a second window in one key.
const calendarMargin = time.Hour

// calendarUnits are Limit.Calendar's units.
var calendarUnits = []string{"day", "week", "month"}

// zones caches time.LoadLocation, which reads the zone's file each time.
var zones sync.Map // string -> *time.Location

// parseCalendar reads Limit.Calendar: a unit, then optionally a space and
// an IANA time zone name (UTC when none).
func parseCalendar(cal string) (unit string, loc *time.Location, err error) {
	unit, zone, _ := strings.Cut(strings.TrimSpace(cal), " ")
	zone = strings.TrimSpace(zone)
	switch unit {
	case "day", "week", "month":
	default:
		return "", nil, fmt.Errorf("invalid calendar %q: want day, week or month, then a time zone, e.g. \"day America/Los_Angeles\"", cal)
	}
	switch zone {
	case "", "UTC":
		return unit, time.UTC, nil
	case "Local":
		// Every process that shares the limit must name the same windows.
		return "", nil, fmt.Errorf("invalid calendar %q: name the time zone (e.g. \"%s Europe/Paris\"): Local is each machine's own", cal, unit)
	}
	if v, ok := zones.Load(zone); ok {
		return unit, v.(*time.Location), nil
	}
	loc, err = time.LoadLocation(zone)
	if err != nil {
		return "", nil, fmt.Errorf("invalid calendar %q: unknown time zone %q: give an IANA name such as America/Los_Angeles (a program without the system's zone database can import time/tzdata)", cal, zone)
	}
	zones.Store(zone, loc)
	return unit, loc, nil
}

// calendarWindow is the window of unit in loc that holds t: its first
// instant, the first instant of the next one, and its name. Windows tile
// time: the next window starts where this one ends.
func calendarWindow(unit string, loc *time.Location, t time.Time) (start, end time.Time, name string) {
	lt := t.In(loc)
	y, m, d := lt.Date()
	first := func(y int, m time.Month, d int) time.Time { return firstInstant(y, m, d, loc) }
	switch unit {
	case "week": // ISO 8601: from Monday
		d -= (int(lt.Weekday()) + 6) % 7
		start, end = first(y, m, d), first(y, m, d+7)
		if !t.Before(end) { // a fall-back hour of Sunday that came after Monday began
			start, end = end, first(y, m, d+14)
		} else if t.Before(start) {
			start, end = first(y, m, d-7), start
		}
		sy, sm, sd := dateOf(start, loc)
		iy, iw := time.Date(sy, sm, sd, 12, 0, 0, 0, time.UTC).ISOWeek()
		return start, end, fmt.Sprintf("%04d-W%02d", iy, iw)
	case "month":
		start, end = first(y, m, 1), first(y, m+1, 1)
		if !t.Before(end) {
			start, end = end, first(y, m+2, 1)
		} else if t.Before(start) {
			start, end = first(y, m-1, 1), start
		}
		sy, sm, _ := dateOf(start, loc)
		return start, end, fmt.Sprintf("%04d-%02d", sy, sm)
	}
	start, end = first(y, m, d), first(y, m, d+1)
	if !t.Before(end) {
		start, end = end, first(y, m, d+2)
	} else if t.Before(start) {
		start, end = first(y, m, d-1), start
	}
	sy, sm, sd := dateOf(start, loc)
	return start, end, fmt.Sprintf("%04d-%02d-%02d", sy, sm, sd)
}

// dateOf is the local date a window starting at start is named by: the
// date of its first instant, or of the next when a gap skipped midnight
// and the first instant reads as the evening before (never in tzdata, but
// exact).
func dateOf(start time.Time, loc *time.Location) (int, time.Month, int) {
	s := start.In(loc)
	if s.Hour() >= 12 {
		s = s.Add(12 * time.Hour)
	}
	return s.Date()
}

// firstInstant is the first instant whose local date in loc is y-m-d
// (normalized as time.Date normalizes): midnight, or, where a transition
// skips midnight (America/Havana, Asia/Beirut, America/Santiago), the
// instant the clocks jumped. time.Date leaves the choice inside a gap
// open, so it is checked: the instant before it must be of an earlier
// date.
func firstInstant(y int, m time.Month, d int, loc *time.Location) time.Time {
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	want := time.Date(y, m, d, 0, 0, 0, 0, time.UTC) // the date, normalized
	day := func(u time.Time) time.Time {
		yy, mm, dd := u.In(loc).Date()
		return time.Date(yy, mm, dd, 0, 0, 0, 0, time.UTC)
	}
	// Inside a gap, time.Date may answer an instant of the day before
	// (the old offset) or after the jump: step to the date's first instant.
	for day(t).Before(want) {
		t = t.Add(time.Minute)
	}
	for !day(t.Add(-time.Nanosecond)).Before(want) {
		t = t.Add(-time.Minute)
	}
	return t
}

// calendarKeySuffix is ":" and the window's name, appended to a calendar
// limit's key.
func calendarKeySuffix(name string) string { return ":" + name }

// resolveCalendar is l, a calendar limit, as the call sends it in the
// window that holds t: fixed_window with period_ms the window's length
// plus calendarMargin, marked with the window's end; and the window's
// name. l's other fields are unchecked here: the plan validates the result
// as it validates any limit.
func (l Limit) resolveCalendar(t time.Time) (Limit, string, error) {
	unit, loc, err := parseCalendar(l.Calendar)
	if err != nil {
		return Limit{}, "", invalidf("%s", err.Error())
	}
	if l.Algorithm != FixedWindow {
		return Limit{}, "", invalidf("invalid algorithm '%s' for calendar %q: a calendar limit is decided by fixed_window: set Algorithm FixedWindow", l.Algorithm, l.Calendar)
	}
	if l.calEnd != 0 {
		// Sent once already (a fallback's call): the same window again.
		l.Period, t = 0, time.UnixMilli(l.calEnd-1)
	} else if l.calAt != 0 {
		t = time.UnixMilli(l.calAt)
	}
	if l.Period != 0 {
		return Limit{}, "", invalidf("invalid period '%v' for calendar %q: a calendar limit's window is its calendar %s: leave Period 0", l.Period, l.Calendar, unit)
	}
	start, end, name := calendarWindow(unit, loc, t)
	span := end.Sub(start) + calendarMargin
	l.Period = (span + time.Millisecond - 1) / time.Millisecond * time.Millisecond
	l.calEnd, l.calAt = end.UnixMilli(), 0
	if end.Sub(end.Truncate(time.Millisecond)) != 0 {
		l.calEnd++ // an end inside a millisecond (never in tzdata): the next whole one
	}
	return l, name, nil
}

// validateCalendar is Validate for a calendar limit: its calendar, and
// the call it makes in today's window, as the scripts would check it (a
// calendar window's call is the same every day but for its period, which
// stays within the range). Limit.Validate answers with it for a limit with
// a Calendar (a Period of 0 is otherwise refused).
func (l Limit) validateCalendar() error {
	r, _, err := l.resolveCalendar(time.Now())
	if err != nil {
		return err
	}
	return r.validate(0)
}

// hasCalendar reports whether a limit of limits is a calendar one.
func hasCalendar(limits []Limit) bool {
	for i := range limits {
		if limits[i].Calendar != "" {
			return true
		}
	}
	return false
}

func hasCalendarKey(keys []KeyLimit) bool {
	for i := range keys {
		if keys[i].Limit.Calendar != "" {
			return true
		}
	}
	return false
}
