package main

import (
	"fmt"
	"html"
	"strings"
	"time"

	"github.com/redisrate/redisrate"
)

// svg draws the timelines as a chart: one lane for the offered traffic and
// one per algorithm, with units admitted as green bars above the lane's
// baseline and units denied as red bars below it, over the pattern's phases.
func (r *report) svg() string {
	const (
		width, left, right = 1160.0, 230.0, 24.0
		top, laneH, gap    = 92.0, 74.0, 10.0
		half               = laneH/2 - 4
	)
	var lanes []*lane
	for _, ln := range r.lanes {
		if !ln.skipped {
			lanes = append(lanes, ln)
		}
	}
	plotW := width - left - right
	total := r.pat.total
	x := func(d time.Duration) float64 { return left + plotW*float64(d)/float64(total) }
	slot := r.cfg.limit.Period / 16
	offered, _ := r.columns(nil, slot)
	peak := int64(1)
	for _, v := range offered {
		peak = max(peak, v)
	}
	bottom := top + float64(len(lanes)+1)*(laneH+gap)
	height := bottom + 64

	var b strings.Builder
	f := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	lim := r.cfg.limit
	f(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif" font-size="13">`+"\n", width, height, width, height)
	f(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	f(`<text x="%.0f" y="28" font-size="19" font-weight="bold" fill="#222">redisrate: one traffic pattern through %d algorithms, limit %s, burst %d</text>`+"\n",
		20.0, len(lanes), esc(redisrate.Per(lim.Rate, lim.Period).String()), lim.Capacity())
	f(`<text x="%.0f" y="50" fill="#555">%s. Green above each line: units admitted; red below: units denied (per %s).</text>`+"\n",
		20.0, esc(strings.TrimSuffix(r.server, ", simulated clock")+map[bool]string{true: " in real time", false: ", simulated clock"}[r.real]), fmtDur(slot))

	// phases: shaded bands with their names
	colors := map[string]string{"steady": "#eef4fb", "burst": "#fdecd8", "pause": "#f6f6f6", "costly": "#f3e8f8"}
	for _, ph := range r.pat.phases {
		f(`<rect x="%.1f" y="%.0f" width="%.1f" height="%.0f" fill="%s"/>`+"\n", x(ph.from), top-22, x(ph.to)-x(ph.from), bottom-top+22, colors[ph.name])
	}
	for _, ph := range r.pat.phases {
		anchor, tx := "middle", (x(ph.from)+x(ph.to))/2
		if ph.name == "burst" {
			anchor, tx = "start", x(ph.from)+2
		}
		f(`<text x="%.1f" y="%.0f" text-anchor="%s" fill="#666" font-style="italic">%s</text>`+"\n", tx, top-8, anchor, ph.name)
	}
	// time axis: a grid line per period
	for k := 0; time.Duration(k)*r.cfg.limit.Period <= total; k++ {
		xx := x(time.Duration(k) * r.cfg.limit.Period)
		f(`<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#ccc" stroke-dasharray="3,3"/>`+"\n", xx, top-22, xx, bottom)
		f(`<text x="%.1f" y="%.0f" text-anchor="middle" fill="#444">%s</text>`+"\n", xx, bottom+18, fmtDur(time.Duration(k)*r.cfg.limit.Period))
	}
	f(`<text x="%.1f" y="%.0f" text-anchor="middle" fill="#444">time</text>`+"\n", left+plotW/2, bottom+38)

	bar := func(cols []int64, base float64, up bool, color string) {
		w := plotW * float64(slot) / float64(total)
		for i, v := range cols {
			if v == 0 {
				continue
			}
			h := max(1.5, half*float64(v)/float64(peak))
			y := base - h
			if !up {
				y = base
			}
			f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", left+float64(i)*w+0.5, y, max(1, w-1), h, color)
		}
	}
	laneTop := top
	drawLane := func(name, sub, sub2 string, ok, no []int64, okColor string) {
		base := laneTop + laneH/2
		f(`<text x="%.0f" y="%.1f" text-anchor="end" font-weight="bold" fill="#222">%s</text>`+"\n", left-12, base-8, esc(name))
		f(`<text x="%.0f" y="%.1f" text-anchor="end" fill="#666" font-size="11.5">%s</text>`+"\n", left-12, base+7, esc(sub))
		f(`<text x="%.0f" y="%.1f" text-anchor="end" fill="#666" font-size="11.5">%s</text>`+"\n", left-12, base+21, esc(sub2))
		bar(ok, base, true, okColor)
		bar(no, base, false, "#d64541")
		f(`<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#888"/>`+"\n", left, base, left+plotW, base)
		laneTop += laneH + gap
	}
	var n int64
	for _, v := range offered {
		n += v
	}
	drawLane("offered", fmt.Sprintf("%d requests, %d units", len(r.pat.reqs), n), "", offered, nil, "#5b7fa6")
	for _, ln := range lanes {
		s := ln.stats(r.cfg.limit.Period)
		ok, no := r.columns(ln, slot)
		wait := "longest wait " + fmtDur(s.longestWait)
		if s.never {
			wait = "some never admitted"
		}
		drawLane(ln.algo.String(), fmt.Sprintf("%d admitted, %d denied", s.admitted, s.denied),
			fmt.Sprintf("most in %s: %d; %s", fmtDur(r.cfg.limit.Period), s.most1, wait), ok, no, "#2e9d57")
	}
	f(`<text x="%.0f" y="%.0f" fill="#666" font-size="11.5">bar height: units per %s; the tallest bar is %d units</text>`+"\n", 20.0, bottom+38, fmtDur(slot), peak)
	b.WriteString("</svg>\n")
	return b.String()
}

func esc(s string) string { return html.EscapeString(s) }
