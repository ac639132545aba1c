package redisrate

import (
	"errors"
	"fmt"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, on a machine without the zone database too
)

// calendarZones are the zones the calendar windows are checked in: UTC,
// daylight saving time in both hemispheres, offsets of 30 and 45 minutes
// (with DST too: Lord Howe moves by 30 minutes, Chatham sits at +12:45),
// and zones whose transitions fall at midnight, so that a day starts at
// 01:00 or midnight comes twice (Havana, Santiago, Beirut, Cairo, Asuncion).
var calendarZones = []string{
	"UTC", "America/Los_Angeles", "America/New_York", "Europe/London", "Europe/Berlin",
	"Australia/Sydney", "Australia/Lord_Howe", "Australia/Adelaide", "Asia/Kolkata",
	"Asia/Kathmandu", "Pacific/Chatham", "America/St_Johns", "America/Havana",
	"America/Santiago", "Asia/Beirut", "Africa/Cairo", "America/Asuncion",
	"Pacific/Kiritimati", "Pacific/Pago_Pago",
}

// maxCalendarPeriod is CONTRACT.md v4's longest period_ms of the exact
// range, 366 days.
const maxCalendarPeriod = 366 * 24 * time.Hour

// TestCalendarWindows walks every day, week and month from 2024 to 2031 in
// each zone, window after window, and proves of each what the calendar
// keys rely on: windows tile time (each starts where the last ended); a
// window's start is the first instant of its date (the instant before it
// is of an earlier window) and every instant up to its end is in it; its
// name is its date and no other window's; its length is the wall clock's
// (23 or 25 hours on a DST day, 23.5 or 24.5 on Lord Howe's); and the
// period sent, the length plus calendarMargin and within the contract's
// range, makes fixed_window's window, which starts at the key's first
// request (at or after the start), outlast the calendar window by at
// least calendarMargin and at most one window and the margin.
func TestCalendarWindows(t *testing.T) {
	from := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	to := time.Date(2032, 1, 1, 0, 0, 0, 0, time.UTC)
	checked, dstDays, notMidnight := 0, map[string]map[time.Duration]int{}, map[string]int{}
	for _, zone := range calendarZones {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		dstDays[zone] = map[time.Duration]int{}
		for _, unit := range calendarUnits {
			lim := Limit{Algorithm: FixedWindow, Rate: 100_000, Calendar: unit + " " + zone}
			names := map[string]bool{}
			start, _, _ := calendarWindow(unit, loc, from.Add(-24*time.Hour))
			for start.Before(to) {
				s, end, name := calendarWindow(unit, loc, start)
				where := fmt.Sprintf("%s %s window %s [%v, %v)", zone, unit, name, s.In(loc), end.In(loc))
				if !s.Equal(start) {
					t.Fatalf("%s: the window at its predecessor's end starts at %v: windows must tile", where, s)
				}
				if !end.After(s) {
					t.Fatalf("%s: empty", where)
				}
				if _, prevEnd, prev := calendarWindow(unit, loc, s.Add(-time.Nanosecond)); prev == name || !prevEnd.Equal(s) {
					t.Fatalf("%s: the instant before its start is in %s, ending %v", where, prev, prevEnd)
				}
				if s2, _, last := calendarWindow(unit, loc, end.Add(-time.Nanosecond)); last != name || !s2.Equal(s) {
					t.Fatalf("%s: its last instant is in %s", where, last)
				}
				if names[name] {
					t.Fatalf("%s: a second window named %s", where, name)
				}
				names[name] = true
				checkWindowName(t, where, unit, loc, s, name)
				if l := s.In(loc); l.Hour() != 0 || l.Minute() != 0 {
					notMidnight[zone]++
				}
				length := end.Sub(s)
				if unit == "day" {
					if length < 22*time.Hour || length > 26*time.Hour {
						t.Fatalf("%s: %v long", where, length)
					}
					if length != 24*time.Hour {
						dstDays[zone][length]++
					}
				}
				// A request at any millisecond of the window opens the key's
				// fixed window: the window opened by the first request sent,
				// and the one opened at the last instant, bound the rest.
				sent, gotName, err := lim.resolveCalendar(s.Add(length / 2))
				if err != nil || gotName != name {
					t.Fatalf("%s: resolved as %s, %v", where, gotName, err)
				}
				if sent.Period > maxCalendarPeriod || sent.Period%time.Millisecond != 0 || sent.Period < length+calendarMargin ||
					sent.Period >= length+calendarMargin+time.Millisecond || sent.calEnd != end.UnixMilli() {
					t.Fatalf("%s: sent with period %v, end %d: want %v + %v, whole ms, at most 366 days, end %d",
						where, sent.Period, sent.calEnd, length, calendarMargin, end.UnixMilli())
				}
				if err := sent.validate(0); err != nil {
					t.Fatalf("%s: the call sent is refused: %v", where, err)
				}
				for _, t0 := range []time.Time{s, end.Add(-time.Millisecond)} {
					if ends := t0.Add(sent.Period); ends.Before(end.Add(calendarMargin)) || ends.After(end.Add(length+calendarMargin)) {
						t.Fatalf("%s: a key first written at %v lives to %v", where, t0, ends)
					}
				}
				start = end
				checked++
			}
		}
	}
	t.Logf("%d windows checked in %d zones; days not 24 hours long: %v; windows that start after a skipped midnight: %v",
		checked, len(calendarZones), dstDays, notMidnight)
	if notMidnight["America/Havana"] == 0 || notMidnight["America/Santiago"] == 0 {
		t.Errorf("no window started after a skipped midnight in Havana or Santiago: the zones no longer test it")
	}
	for zone, want := range map[string][]time.Duration{
		"America/Los_Angeles": {23 * time.Hour, 25 * time.Hour},
		"Australia/Lord_Howe": {23*time.Hour + 30*time.Minute, 24*time.Hour + 30*time.Minute},
		"America/Havana":      {23 * time.Hour, 25 * time.Hour},
		"Asia/Kolkata":        nil,
	} {
		got := dstDays[zone]
		if len(got) != len(want) {
			t.Errorf("%s: days not 24 hours long %v; want %v, each 8 times", zone, got, want)
		}
		for _, d := range want {
			if got[d] != 8 {
				t.Errorf("%s: %d days of %v; want 8, one a year", zone, got[d], d)
			}
		}
	}
}

// checkWindowName holds a window's name to its first instant's date: the
// date itself for a day, its ISO week (a Monday) for a week, its month.
func checkWindowName(t *testing.T, where, unit string, loc *time.Location, start time.Time, name string) {
	t.Helper()
	l := start.In(loc)
	if l.Hour() != 0 || l.Minute() != 0 {
		// A transition skipped midnight: the day starts when the clocks
		// jumped, and the instant before it was of the day before.
		if before := start.Add(-time.Nanosecond).In(loc); before.Hour() != 23 {
			t.Fatalf("%s: starts at %v, after %v", where, l, before)
		}
	}
	var want string
	switch unit {
	case "day":
		want = l.Format("2006-01-02")
	case "week":
		y, w := l.ISOWeek()
		if l.Weekday() != time.Monday {
			t.Fatalf("%s: starts on a %v", where, l.Weekday())
		}
		want = fmt.Sprintf("%04d-W%02d", y, w)
	case "month":
		if l.Day() != 1 {
			t.Fatalf("%s: starts on day %d", where, l.Day())
		}
		want = l.Format("2006-01")
	}
	if name != want {
		t.Fatalf("%s: named %s; want %s", where, name, want)
	}
}

// Calendar strings are checked when the call is planned, with a way out
// in each error.
func TestCalendarErrors(t *testing.T) {
	for cal, want := range map[string]string{
		"fortnight":             "want day, week or month",
		"day Mars/Olympus":      `unknown time zone "Mars/Olympus"`,
		"day Local":             "Local is each machine's own",
		"":                      "",
		"month":                 "",
		"week Asia/Kathmandu":   "",
		"day  America/New_York": "",
	} {
		_, _, err := Limit{Algorithm: FixedWindow, Rate: 1, Calendar: cal}.resolveCalendar(time.Now())
		if cal == "" {
			continue
		}
		if (err == nil) != (want == "") || err != nil && !contains(err.Error(), want) {
			t.Errorf("calendar %q: %v; want %q", cal, err, want)
		}
	}
	for _, c := range []struct {
		lim  Limit
		want string
	}{
		{Limit{Rate: 1, Calendar: "day"}, "set Algorithm FixedWindow"},
		{Limit{Algorithm: FixedWindow, Rate: 1, Period: time.Hour, Calendar: "day"}, "leave Period 0"},
	} {
		if _, _, err := c.lim.resolveCalendar(time.Now()); err == nil || !contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want %q", c.lim, err, c.want)
		}
	}
}

func contains(s, sub string) bool { return len(sub) == 0 || len(s) >= len(sub) && indexOf(s, sub) >= 0 }

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// ParseLimit reads calendar limits as String writes them, and says what to
// write instead of what it refuses.
func TestParseCalendarLimit(t *testing.T) {
	for text, want := range map[string]Limit{
		"100000/day calendar America/Los_Angeles": {Algorithm: FixedWindow, Rate: 100_000, Calendar: "day America/Los_Angeles"},
		"1000000000/month calendar":               {Algorithm: FixedWindow, Rate: 1_000_000_000, Calendar: "month"},
		"5000/week calendar Asia/Kathmandu":       {Algorithm: FixedWindow, Rate: 5000, Calendar: "week Asia/Kathmandu"},
		"7/week":                                  {Rate: 7, Period: 7 * 24 * time.Hour},
		"7/w token_bucket":                        {Algorithm: TokenBucket, Rate: 7, Period: 7 * 24 * time.Hour},
	} {
		got, err := ParseLimit(text)
		if err != nil || got != want {
			t.Errorf("ParseLimit(%q) = %+v, %v; want %+v", text, got, err, want)
			continue
		}
		if back, err := ParseLimit(got.String()); err != nil || back != got {
			t.Errorf("ParseLimit(%q), the String of %q: %+v, %v", got.String(), text, back, err)
		}
	}
	for _, alias := range []string{"10/d calendar UTC", "10/day fixed_window calendar UTC", "10/day calendar UTC fixed_window", "10/mo calendar UTC"} {
		if _, err := ParseLimit(alias); err != nil {
			t.Errorf("ParseLimit(%q): %v", alias, err)
		}
	}
	for text, want := range map[string]string{
		"10/month":                       `a month has no fixed length: write 30d for 30 days, or add "calendar ZONE" for the calendar month, e.g. "10/month calendar UTC"`,
		"10/mo":                          "a month has no fixed length",
		"2.5/day calendar":               `rate "2.5" must be whole`,
		"10/2d calendar":                 `period "2d" must be day, week or month`,
		"10/day calendar gcra":           "decided by fixed_window, not gcra: leave the algorithm out",
		"10/day calendar Mars/Olympus":   `unknown time zone "Mars/Olympus": give an IANA name`,
		"10/day calendar Local":          "Local is each machine's own",
		"10/day calendar calendar":       "calendar given twice",
		"10/day calendar burst 20":       "invalid burst '20': must be empty, 0 or equal to limit for fixed_window",
		"10/day calendar UTC burst 1 x":  `"x" is neither "burst N" nor an algorithm`,
		"10/s burst 20 sliding_window":   "equal to limit for sliding_window",
		"10001/h sliding_log":            "up to 10000)",
		"10/day calendar UTC burst 1.5":  `burst "1.5" must be a whole number`,
		"1000/day calendar UTC burst 10": "invalid burst '10'",
	} {
		_, err := ParseLimit(text)
		if err == nil || !contains(err.Error(), want) {
			t.Errorf("ParseLimit(%q): %v; want %q", text, err, want)
		}
	}
	// A window's burst error names no range: the way out is the rule.
	if _, err := ParseLimit("10/s burst 20 sliding_window"); err != nil && contains(err.Error(), "10^12") {
		t.Errorf("a burst that breaks the window rule got the range's hint: %v", err)
	}
}

// Validate takes a calendar limit as every call does (its calendar, and
// the call of today's window), where a Period of 0 would otherwise be
// refused: so configuration checked with Validate (the middleware's rules,
// a quota) takes calendar limits too.
func TestCalendarValidate(t *testing.T) {
	for _, c := range []struct {
		lim  Limit
		want string // "": valid
	}{
		{Limit{Algorithm: FixedWindow, Rate: 100_000, Calendar: "day America/Los_Angeles"}, ""},
		{Limit{Algorithm: FixedWindow, Rate: 1_000_000_000, Calendar: "month"}, ""},
		{Limit{Algorithm: FixedWindow, Rate: 5, Calendar: "week UTC"}, ""},
		{Limit{Algorithm: FixedWindow, Rate: 1, Calendar: "fortnight"}, "want day, week or month"},
		{Limit{Rate: 1, Calendar: "day"}, "set Algorithm FixedWindow"},
		{Limit{Algorithm: FixedWindow, Rate: 0, Calendar: "day"}, "limit"},
	} {
		err := c.lim.Validate()
		if c.want == "" && err != nil {
			t.Errorf("%+v: %v; want it valid", c.lim, err)
		}
		if c.want != "" && (!errors.Is(err, ErrInvalid) || !contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v; want ErrInvalid saying %q", c.lim, err, c.want)
		}
	}
}
