/* cachelab report: interactive charts drawn as inline SVG from the JSON specs in the page.
 *
 * Every <figure class="cl-fig"> holds one or more <script type="application/json"
 * class="cl-spec"> elements (built by cachelab/report/charts.py; the format is described
 * there) and the static image of the same plot. This script draws each spec into the figure
 * and hides the static image (a button shows it again); with scripts off, the image is all
 * there is. No library, no network, no eval, no inline event handlers.
 *
 * Each chart: axes with ticks (decades on log axes), a legend whose entries hide and show
 * their series, a readout of the point nearest the pointer (series, x, y in the axis units),
 * drag a rectangle to zoom (a mostly horizontal drag zooms x only), double-click to reset.
 * A chart is drawn at its box's width (redrawn when the window is resized), so its labels keep
 * their size on a phone; labels too long for it wrap or end in an ellipsis. The axes are
 * scaled to the data series; reference series ("ref") are drawn clipped to them.
 * window.cachelabCharts lists the charts drawn (for scripting and for tests).
 */
(function () {
  "use strict";

  var PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                 "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  var NEUTRAL = "#444";
  // A chart is drawn at the width of its box (so its 11 px labels are 11 px on screen), at
  // most W_MAX wide; below W_MIN it is drawn at W_MIN and scaled down.
  var W_MAX = 760, W_MIN = 300, NARROW = 560;
  var M = {l: 70, r: 30, t: 16, b: 50};
  var NS = (function () {
    var d = document.createElement("div");
    d.innerHTML = "<svg></svg>";  // the HTML parser knows the SVG namespace; no URL needed
    return d.firstChild.namespaceURI;
  })();
  var clipCount = 0;

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) {
      if (Object.prototype.hasOwnProperty.call(attrs, k) && attrs[k] !== null) {
        e.setAttribute(k, String(attrs[k]));
      }
    }
    if (parent) { parent.appendChild(e); }
    return e;
  }

  function html(name, cls, parent, text) {
    var e = document.createElement(name);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    if (parent) { parent.appendChild(e); }
    return e;
  }

  // -- numbers -------------------------------------------------------------------------------

  function plain(v) {
    // Up to 4 significant digits, no exponent, no trailing zeros.
    if (v === 0) { return "0"; }
    var a = Math.abs(v);
    if (a >= 1e4) { return Math.round(v).toLocaleString("en-US"); }
    var digits = Math.max(0, 3 - Math.floor(Math.log10(a)));
    var s = v.toFixed(Math.min(digits, 12));
    if (s.indexOf(".") >= 0) { s = s.replace(/0+$/, "").replace(/\.$/, ""); }
    return s;
  }

  function tickLabel(axis, v) {
    if (axis.format === "percent") { return plain(round10(100 * v)) + "%"; }
    return plain(round10(v));
  }

  function valueText(axis, v) {
    if (axis.format === "invpct") { return "p" + plain(round10(100 - v)); }
    if (axis.format === "percent") { return plain(round10(100 * v)) + " %"; }
    return plain(v) + (axis.unit ? (axis.unit.charAt(0) === "/" ? "" : " ") + axis.unit : "");
  }

  function round10(v) { return v === 0 ? 0 : parseFloat(v.toPrecision(10)); }

  // -- labels that fit -----------------------------------------------------------------------

  function shorten(t, text, room) {
    // `text` in the SVG text element t, cut with an ellipsis to `room` user units (the whole
    // text stays in a <title>, shown on hover).
    t.textContent = text;
    if (t.getComputedTextLength() <= room) { return; }
    var n = text.length;
    while (n > 1) {
      n -= 1;
      t.textContent = text.slice(0, n).replace(/\s+$/, "") + "\u2026";
      if (t.getComputedTextLength() <= room) { break; }
    }
    el("title", {}, t).textContent = text;
  }

  function wrapped(t, text, room, x, lineHeight) {
    // `text` in t on one line, or on two (split at the space nearest the middle) when it
    // is longer than `room`; each line shortened if still too long. Returns the lines used.
    t.textContent = text;
    if (t.getComputedTextLength() <= room) { return 1; }
    var words = text.split(" "), best = null;
    for (var i = 1; i < words.length; i++) {
      var a = words.slice(0, i).join(" "), b = words.slice(i).join(" ");
      var d = Math.max(a.length, b.length);
      if (best === null || d < best.d) { best = {a: a, b: b, d: d}; }
    }
    if (best === null) { shorten(t, text, room); return 1; }
    t.textContent = "";
    shorten(el("tspan", {x: x, dy: 0}, t), best.a, room);
    shorten(el("tspan", {x: x, dy: lineHeight}, t), best.b, room);
    return 2;
  }

  // -- scales and ticks ----------------------------------------------------------------------

  function makeScale(log, d0, d1, p0, p1) {
    var t = log ? Math.log10 : function (v) { return v; };
    var a = t(d0), b = t(d1);
    return {
      log: log, d0: d0, d1: d1, len: Math.abs(p1 - p0),
      px: function (v) { return p0 + (t(v) - a) / (b - a) * (p1 - p0); },
      inv: function (p) {
        var u = a + (p - p0) / (p1 - p0) * (b - a);
        return log ? Math.pow(10, u) : u;
      }
    };
  }

  function linearTicks(lo, hi, count) {
    var span = hi - lo;
    if (!(span > 0)) { return [lo]; }
    var step = Math.pow(10, Math.floor(Math.log10(span / count)));
    var err = span / count / step;
    if (err >= 7.5) { step *= 10; } else if (err >= 3.5) { step *= 5; } else if (err >= 1.5) { step *= 2; }
    var out = [];
    for (var v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) {
      out.push(Math.abs(v) < step * 1e-9 ? 0 : round10(v));
    }
    return out;
  }

  function logTicks(lo, hi, count) {
    var a = Math.floor(Math.log10(lo) + 1e-9), b = Math.ceil(Math.log10(hi) - 1e-9);
    var mant = 3 * (b - a) <= count ? [1, 2, 5] : [1];
    var every = Math.max(1, Math.ceil((b - a) / count));
    var out = [];
    for (var k = a; k <= b; k++) {
      for (var i = 0; i < mant.length; i++) {
        var v = round10(mant[i] * Math.pow(10, k));
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9) && (mant[i] !== 1 || k % every === 0)) {
          out.push(v);
        }
      }
    }
    if (out.length < 2) { out = [lo, hi]; }
    return out;
  }

  function ticks(s, room) {
    // About one tick per `room` pixels of the axis, 3 to 8 of them.
    var lo = Math.min(s.d0, s.d1), hi = Math.max(s.d0, s.d1);
    var count = Math.max(3, Math.min(8, Math.floor(s.len / room)));
    return s.log ? logTicks(lo, hi, count) : linearTicks(lo, hi, Math.min(6, count));
  }

  function niceLog(lo, hi) {
    // The 1-2-5 numbers just outside [lo, hi] (with a 5 % margin), as the static plots do.
    var nice = function (v, up) {
      var k = Math.floor(Math.log10(v));
      var m = [1, 2, 5, 10];
      if (up) {
        for (var i = 0; i < m.length; i++) { if (m[i] * Math.pow(10, k) >= v * (1 - 1e-12)) { return m[i] * Math.pow(10, k); } }
      }
      for (var j = m.length - 1; j >= 0; j--) { if (m[j] * Math.pow(10, k) <= v * (1 + 1e-12)) { return m[j] * Math.pow(10, k); } }
      return Math.pow(10, k);
    };
    return [nice(lo / 1.05, false), nice(hi * 1.05, true)];
  }

  function autoDomain(axis, values, zero) {
    var lo = Infinity, hi = -Infinity;
    values.forEach(function (v) {
      if (isFinite(v) && (axis.scale !== "log" || v > 0)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    });
    if (!isFinite(lo)) { lo = axis.scale === "log" ? 1 : 0; hi = axis.scale === "log" ? 10 : 1; }
    var d;
    if (axis.scale === "log") {
      if (axis.format === "invpct") {
        d = [Math.min(100, Math.pow(10, Math.ceil(Math.log10(hi) - 1e-9))),
             Math.pow(10, Math.floor(Math.log10(lo) + 1e-9))];
        if (d[1] >= d[0]) { d[1] = d[0] / 10; }
        d = [d[1], d[0]];
      } else {
        d = niceLog(lo, hi);
      }
    } else {
      if (zero) { lo = Math.min(0, lo); hi = Math.max(0, hi); }
      var pad = (hi - lo) * 0.05 || Math.abs(hi) * 0.1 || 1;
      d = [zero && lo === 0 ? 0 : lo - pad, hi + pad];
    }
    return axis.reverse ? [d[1], d[0]] : d;
  }

  // -- one chart -----------------------------------------------------------------------------

  function Chart(box, spec, index) {
    this.spec = spec;
    this.index = index;
    this.hidden = spec.series.map(function () { return false; });
    this.box = box;
    this.bars = spec.kind === "bars";
    this.title = html("div", "cl-title", box, spec.title || "");
    this.svg = el("svg", {"class": "cl-svg", role: "img", "aria-label": spec.title || "chart"},
                  box);
    this.clip = "cl-clip-" + (++clipCount);
    this.fit();
    this.legend = html("div", "cl-legend", box);
    this.readout = html("div", "cl-readout", box, "\u00a0");
    this.readout.setAttribute("aria-live", "polite");
    this.initDomains();
    this.buildLegend();
    this.draw();
    this.listen();
  }

  Chart.prototype.fit = function () {
    // Size the drawing to its box: W user units = W pixels (from W_MIN to W_MAX), a lower
    // chart and narrower margins on a narrow screen. True when the width changed.
    var w = Math.max(W_MIN, Math.min(W_MAX, Math.round(this.box.clientWidth) || W_MAX));
    if (w === this.W) { return false; }
    var narrow = w < NARROW;
    this.W = w;
    this.xr = w - (narrow ? 16 : M.r);
    if (this.bars) {
      var longest = Math.max.apply(null, this.spec.categories.map(function (c) { return String(c).length; }));
      this.H = M.t + M.b + Math.max(3, this.spec.categories.length) * 26;
      this.ml = Math.round(Math.min(300, (narrow ? 0.5 : 0.42) * w, 30 + 6.2 * longest));
    } else {
      this.H = narrow ? Math.round(Math.max(260, 0.75 * w)) : 420;
      this.ml = narrow ? 64 : M.l;
    }
    this.svg.setAttribute("viewBox", "0 0 " + w + " " + this.H);
    return true;
  };

  Chart.prototype.color = function (i) {
    var c = this.spec.series[i].color;
    if (c === -1) { return NEUTRAL; }
    return PALETTE[(c === undefined ? i : c) % PALETTE.length];
  };

  Chart.prototype.initDomains = function () {
    var spec = this.spec, xs = [], ys = [];
    if (this.bars) {
      spec.series.forEach(function (s) {
        ["values", "lo", "hi"].forEach(function (k) {
          (s[k] || []).forEach(function (v) { if (v !== null) { xs.push(v); } });
        });
      });
      this.home = {x: autoDomain(spec.x, xs, spec.zero_line || spec.x.scale !== "log")};
      if (spec.x.scale === "log") {
        var d = this.home.x;
        this.home.x = [d[0] / 2, d[1] * 2];
      }
    } else {
      // A reference series (linear scaling, an ideal line, a fitted curve drawn past the
      // data) is drawn and clipped to the plot, but the axes are scaled to the other series.
      var data = spec.series.filter(function (s) { return !s.ref && s.points.length; });
      (data.length ? data : spec.series).forEach(function (s) {
        s.points.forEach(function (p) { xs.push(p[0]); ys.push(p[1]); });
        (s.band || []).forEach(function (b) { xs.push(b[0]); ys.push(b[1], b[2]); });
        if (s.type === "bars") { ys.push(0); }
      });
      this.home = {x: autoDomain(spec.x, xs, false), y: autoDomain(spec.y, ys, spec.zero)};
    }
    this.dom = {x: this.home.x.slice(), y: this.home.y ? this.home.y.slice() : null};
  };

  Chart.prototype.scales = function () {
    var x = makeScale(this.spec.x.scale === "log", this.dom.x[0], this.dom.x[1], this.ml, this.xr);
    var y = this.bars ? null :
      makeScale(this.spec.y.scale === "log", this.dom.y[0], this.dom.y[1], this.H - M.b, M.t);
    return {x: x, y: y};
  };

  Chart.prototype.draw = function () {
    var svg = this.svg, spec = this.spec, H = this.H, ml = this.ml, xr = this.xr;
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    var sc = this.scales();
    this.sc = sc;
    var defs = el("defs", {}, svg);
    el("rect", {x: ml, y: M.t, width: xr - ml, height: H - M.t - M.b}, el("clipPath", {id: this.clip}, defs));
    el("rect", {x: ml, y: M.t, width: xr - ml, height: H - M.t - M.b, fill: "#fff",
                stroke: "#999", "class": "cl-frame"}, svg);
    var axes = el("g", {"class": "cl-axes", "font-size": 11, fill: "#333"}, svg);
    var W = this.W;
    ticks(sc.x, 80).forEach(function (v) {
      var p = sc.x.px(v);
      el("line", {x1: p, x2: p, y1: M.t, y2: H - M.b, stroke: "#e4e4e4"}, axes);
      var t = el("text", {x: p, y: H - M.b + 15, "text-anchor": "middle"}, axes);
      t.textContent = tickLabel(spec.x, v);
      // A label centred on a tick near the drawing's edge is kept inside it (a phone's
      // narrow right margin cut "10,000" at the last tick).
      var half = t.getComputedTextLength() / 2;
      if (p + half > W - 1) {
        t.setAttribute("text-anchor", "end");
        t.setAttribute("x", W - 1);
      } else if (p - half < 1) {
        t.setAttribute("text-anchor", "start");
        t.setAttribute("x", 1);
      }
    });
    var cx = (ml + xr) / 2;  // centred under the plot, kept inside the drawing
    var xl = el("text", {x: cx, y: H - 12, "text-anchor": "middle", "class": "cl-xlabel"}, axes);
    if (wrapped(xl, spec.x.label || "", 2 * Math.min(cx, this.W - cx) - 6, cx, 13) > 1) {
      xl.setAttribute("y", H - 19);
    }
    var plot = el("g", {"clip-path": "url(#" + this.clip + ")"}, svg);
    if (this.bars) {
      this.drawBars(plot, axes, sc);
    } else {
      ticks(sc.y, 50).forEach(function (v) {
        var p = sc.y.px(v);
        el("line", {x1: ml, x2: xr, y1: p, y2: p, stroke: "#e4e4e4"}, axes);
        el("text", {x: ml - 6, y: p + 4, "text-anchor": "end"}, axes).textContent = tickLabel(spec.y, v);
      });
      var yl = el("text", {x: 0, y: 0, "text-anchor": "middle", "class": "cl-ylabel",
                           transform: "translate(16," + (M.t + H - M.b) / 2 + ") rotate(-90)"}, axes);
      shorten(yl, spec.y.label || "", H - M.t - M.b);
      this.drawMarks(plot, sc);
      this.drawSeries(plot, sc);
    }
    this.hover = el("g", {"class": "cl-hover", "pointer-events": "none"}, svg);
    this.zoomRect = el("rect", {"class": "cl-zoom", x: 0, y: 0, width: 0, height: 0,
                                fill: "rgba(60,110,200,0.15)", stroke: "#3c6ec8",
                                visibility: "hidden"}, svg);
  };

  Chart.prototype.markLabel = function (plot, text, x, y, color) {
    // A mark's label at x, inside the plot: it ends at the plot's right edge when it would
    // run past it, and is shortened when the plot is narrower than it.
    var t = el("text", {x: x, y: y, "font-size": 10, fill: color}, plot);
    shorten(t, text, this.xr - this.ml - 8);
    if (x + t.getComputedTextLength() > this.xr - 4) {
      t.setAttribute("x", this.xr - 4);
      t.setAttribute("text-anchor", "end");
    }
  };

  Chart.prototype.drawMarks = function (plot, sc) {
    var H = this.H, self = this;
    (this.spec.marks || []).forEach(function (m) {
      if (m.type === "vspan") {
        var a = sc.x.px(m.from), b = sc.x.px(m.to);
        el("rect", {x: Math.min(a, b), y: M.t, width: Math.abs(b - a), height: H - M.t - M.b,
                    fill: "#e2e2e2", "class": "cl-mark"}, plot);
        self.markLabel(plot, m.label || "", Math.max(self.ml, Math.min(a, b)) + 4, M.t + 13, "#666");
      } else if (m.type === "vline") {
        var p = sc.x.px(m.x);
        el("line", {x1: p, x2: p, y1: M.t, y2: H - M.b, stroke: "#2ca02c", "stroke-dasharray": "5 4",
                    "class": "cl-mark"}, plot);
        self.markLabel(plot, m.label || "", p + 4, H - M.b - 6, "#2ca02c");
      }
    });
  };

  Chart.prototype.drawSeries = function (plot, sc) {
    var self = this, base = this.H - M.b;
    this.spec.series.forEach(function (s, i) {
      var g = el("g", {"class": "cl-series", "data-series": i}, plot);
      if (self.hidden[i]) { g.setAttribute("display", "none"); }
      var col = self.color(i);
      if (s.band && s.band.length) {
        var up = s.band.map(function (b) { return sc.x.px(b[0]).toFixed(1) + "," + sc.y.px(b[2]).toFixed(1); });
        var down = s.band.slice().reverse().map(function (b) { return sc.x.px(b[0]).toFixed(1) + "," + sc.y.px(b[1]).toFixed(1); });
        el("path", {d: "M" + up.join("L") + "L" + down.join("L") + "Z", fill: col, "fill-opacity": 0.18,
                    stroke: "none", "class": "cl-band"}, g);
      }
      if (s.type === "bars") {
        var y0 = sc.y.log ? base : Math.min(base, Math.max(M.t, sc.y.px(0)));
        s.points.forEach(function (p, j) {
          var w = (s.widths || [])[j] || 0;
          var a = sc.x.px(p[0] - w / 2), b = sc.x.px(p[0] + w / 2), y = sc.y.px(p[1]);
          el("rect", {x: Math.min(a, b), y: Math.min(y, y0), width: Math.max(1, Math.abs(b - a)),
                      height: Math.abs(y0 - y), fill: col, "fill-opacity": 0.6}, g);
        });
      } else if (s.type === "points" || s.marker) {
        s.points.forEach(function (p) {
          el("circle", {cx: sc.x.px(p[0]), cy: sc.y.px(p[1]), r: s.type === "points" ? 3.5 : 2.2,
                        fill: col}, g);
        });
      }
      if (s.type === "line" && s.points.length) {
        var d = s.points.map(function (p, j) {
          return (j ? "L" : "M") + sc.x.px(p[0]).toFixed(1) + "," + sc.y.px(p[1]).toFixed(1);
        }).join("");
        el("path", {d: d, fill: "none", stroke: col, "stroke-width": 1.8, "class": "cl-line",
                    "stroke-dasharray": s.dash ? "6 4" : null, "stroke-linejoin": "round"}, g);
      }
    });
  };

  Chart.prototype.rowGeometry = function (r, i) {
    // Vertical centre and height of series i in category row r of a bar chart.
    var rowH = (this.H - M.t - M.b) / this.spec.categories.length;
    var top = M.t + r * rowH, s = this.spec.series[i];
    if (s.style === "dot") {
      var dots = this.spec.series.filter(function (t) { return t.style === "dot"; });
      var k = dots.indexOf(s), n = dots.length;
      return {y: top + rowH / 2 + (k - (n - 1) / 2) * Math.min(8, rowH / (n + 1)), h: 6};
    }
    return {y: top + rowH / 2, h: rowH * (s.thin ? 0.3 : 0.65)};
  };

  Chart.prototype.drawBars = function (plot, axes, sc) {
    var self = this, spec = this.spec, ml = this.ml;
    var x0 = sc.x.log ? ml : sc.x.px(0);
    spec.categories.forEach(function (c, r) {
      var g = self.rowGeometry(r, 0);
      shorten(el("text", {x: ml - 6, y: g.y + 4, "text-anchor": "end"}, axes), String(c), ml - 10);
    });
    if (spec.zero_line && !sc.x.log) {
      el("line", {x1: x0, x2: x0, y1: M.t, y2: self.H - M.b, stroke: "#333"}, plot);
    }
    spec.series.forEach(function (s, i) {
      var g = el("g", {"class": "cl-series", "data-series": i}, plot);
      if (self.hidden[i]) { g.setAttribute("display", "none"); }
      var col = self.color(i);
      s.values.forEach(function (v, r) {
        if (v === null || (sc.x.log && v <= 0)) { return; }
        var geo = self.rowGeometry(r, i), p = sc.x.px(v);
        if (s.style === "dot") {
          if (s.lo && s.lo[r] !== null && s.hi && s.hi[r] !== null) {
            el("line", {x1: sc.x.px(s.lo[r]), x2: sc.x.px(s.hi[r]), y1: geo.y, y2: geo.y,
                        stroke: col, "stroke-width": 1.8}, g);
          }
          el("circle", {cx: p, cy: geo.y, r: 3.5, fill: col}, g);
        } else {
          el("rect", {x: Math.min(x0, p), y: geo.y - geo.h / 2, width: Math.max(1, Math.abs(p - x0)),
                      height: geo.h, fill: col}, g);
        }
      });
    });
  };

  Chart.prototype.buildLegend = function () {
    var self = this;
    this.spec.series.forEach(function (s, i) {
      var b = html("button", "cl-key", self.legend);
      b.type = "button";
      b.setAttribute("aria-pressed", "true");
      b.setAttribute("data-series", String(i));
      b.title = "show or hide this series";
      var sw = html("span", "cl-swatch", b);
      sw.style.background = self.color(i);
      if (s.dash) { sw.style.opacity = "0.55"; }
      html("span", "", b, s.name + (s.band_name ? " (" + s.band_name + ")" : ""));
      b.addEventListener("click", function () {
        self.hidden[i] = !self.hidden[i];
        b.setAttribute("aria-pressed", self.hidden[i] ? "false" : "true");
        b.classList.toggle("off", self.hidden[i]);
        self.draw();
      });
    });
  };

  Chart.prototype.toUser = function (e) {
    var m = this.svg.getScreenCTM();
    return {x: (e.clientX - m.e) / m.a, y: (e.clientY - m.f) / m.d};
  };

  Chart.prototype.inPlot = function (u) {
    return u.x >= this.ml && u.x <= this.xr && u.y >= M.t && u.y <= this.H - M.b;
  };

  Chart.prototype.nearest = function (u) {
    var best = null, sc = this.sc, self = this;
    this.spec.series.forEach(function (s, i) {
      if (self.hidden[i]) { return; }
      if (self.bars) {
        s.values.forEach(function (v, r) {
          if (v === null) { return; }
          var g = self.rowGeometry(r, i), d = Math.abs(g.y - u.y);
          if (best === null || d < best.d) { best = {d: d, i: i, j: r, px: sc.x.px(v), py: g.y}; }
        });
      } else {
        s.points.forEach(function (p, j) {
          var px = sc.x.px(p[0]), py = sc.y.px(p[1]);
          if (px < self.ml - 1 || px > self.xr + 1 || py < M.t - 1 || py > self.H - M.b + 1) { return; }
          var d = Math.hypot(px - u.x, py - u.y);
          if (best === null || d < best.d) { best = {d: d, i: i, j: j, px: px, py: py}; }
        });
      }
    });
    return best;
  };

  Chart.prototype.show = function (hit) {
    var h = this.hover, r = this.readout, spec = this.spec;
    while (h.firstChild) { h.removeChild(h.firstChild); }
    if (!hit) {
      r.textContent = "\u00a0";
      ["data-series", "data-x", "data-y"].forEach(function (a) { r.removeAttribute(a); });
      return;
    }
    var s = spec.series[hit.i], xv, yv, text;
    el("circle", {cx: hit.px, cy: hit.py, r: 5.5, fill: "none", stroke: "#000", "stroke-width": 1.5}, h);
    if (this.bars) {
      xv = spec.categories[hit.j];
      yv = s.values[hit.j];
      text = xv + " \u00b7 " + s.name + " \u00b7 " + valueText(spec.x, yv);
      if (s.lo && s.lo[hit.j] !== null && s.hi && s.hi[hit.j] !== null) {
        text += " [" + valueText(spec.x, s.lo[hit.j]) + ", " + valueText(spec.x, s.hi[hit.j]) + "]";
      }
    } else {
      xv = s.points[hit.j][0];
      yv = s.points[hit.j][1];
      text = s.name + " \u00b7 " + valueText(spec.x, xv) + " \u00b7 " + valueText(spec.y, yv);
    }
    r.textContent = text;
    r.setAttribute("data-series", String(hit.i));
    r.setAttribute("data-x", String(xv));
    r.setAttribute("data-y", String(yv));
  };

  Chart.prototype.listen = function () {
    var self = this, svg = this.svg, drag = null;
    svg.addEventListener("mousedown", function (e) {
      var u = self.toUser(e);
      if (e.button !== 0 || !self.inPlot(u)) { return; }
      drag = {a: u, b: u};
      e.preventDefault();
    });
    svg.addEventListener("mousemove", function (e) {
      var u = self.toUser(e);
      if (drag) {
        drag.b = u;
        var r = self.dragBox(drag);
        var z = self.zoomRect;
        z.setAttribute("x", r.x); z.setAttribute("y", r.y);
        z.setAttribute("width", r.w); z.setAttribute("height", r.h);
        z.setAttribute("visibility", "visible");
        return;
      }
      self.show(self.inPlot(u) ? self.nearest(u) : null);
    });
    svg.addEventListener("mouseleave", function () { self.show(null); });
    window.addEventListener("mouseup", function () {
      if (!drag) { return; }
      var r = self.dragBox(drag);
      drag = null;
      self.zoomRect.setAttribute("visibility", "hidden");
      if (r.w < 6) { return; }
      var sc = self.sc;
      self.dom.x = [sc.x.inv(r.x), sc.x.inv(r.x + r.w)];
      if (!self.bars && r.yZoom) {
        self.dom.y = [sc.y.inv(r.y + r.h), sc.y.inv(r.y)];
      }
      self.draw();
    });
    svg.addEventListener("dblclick", function () {
      self.dom = {x: self.home.x.slice(), y: self.home.y ? self.home.y.slice() : null};
      self.draw();
    });
  };

  Chart.prototype.dragBox = function (drag) {
    var H = this.H;
    var clamp = function (v, lo, hi) { return Math.max(lo, Math.min(hi, v)); };
    var x1 = clamp(drag.a.x, this.ml, this.xr), x2 = clamp(drag.b.x, this.ml, this.xr);
    var y1 = clamp(drag.a.y, M.t, H - M.b), y2 = clamp(drag.b.y, M.t, H - M.b);
    var yZoom = !this.bars && Math.abs(y2 - y1) >= 12 && Math.abs(y2 - y1) > 0.25 * Math.abs(x2 - x1);
    if (!yZoom) { y1 = M.t; y2 = H - M.b; }
    return {x: Math.min(x1, x2), w: Math.abs(x2 - x1), y: Math.min(y1, y2), h: Math.abs(y2 - y1),
            yZoom: yZoom};
  };

  Chart.prototype.clientPoint = function (i, j) {
    // Where on screen (client pixels) point j of series i is drawn.
    var sc = this.sc, ux, uy;
    if (this.bars) {
      ux = sc.x.px(this.spec.series[i].values[j]);
      uy = this.rowGeometry(j, i).y;
    } else {
      var p = this.spec.series[i].points[j];
      ux = sc.x.px(p[0]);
      uy = sc.y.px(p[1]);
    }
    var m = this.svg.getScreenCTM();
    return [m.a * ux + m.e, m.d * uy + m.f];
  };

  // -- the page ------------------------------------------------------------------------------

  function start() {
    var charts = [];
    window.cachelabCharts = charts;
    var figures = document.querySelectorAll("figure.cl-fig");
    Array.prototype.forEach.call(figures, function (fig) {
      var host = fig.querySelector(".cl-charts");
      var specs = fig.querySelectorAll("script.cl-spec");
      if (!host || !specs.length) { return; }
      var made = [];
      // Shown while drawing: a chart takes its box's width and measures its labels.
      host.hidden = false;
      fig.classList.add("cl-live");
      try {
        Array.prototype.forEach.call(specs, function (node) {
          var box = html("div", "cl-chart", host);
          made.push(new Chart(box, JSON.parse(node.textContent), charts.length + made.length));
        });
      } catch (err) {
        console.error("cachelab chart: " + (err && err.message ? err.message : err));
        while (host.firstChild) { host.removeChild(host.firstChild); }
        host.hidden = true;
        fig.classList.remove("cl-live");
        return;
      }
      made.forEach(function (c) { charts.push(c); });
      var bar = html("div", "cl-tools", null);
      if (fig.querySelector("img")) {
        var toggle = html("button", "cl-toggle", bar, "static image");
        toggle.type = "button";
        toggle.setAttribute("aria-pressed", "false");
        toggle.addEventListener("click", function () {
          var on = fig.classList.toggle("cl-static");
          toggle.setAttribute("aria-pressed", on ? "true" : "false");
          toggle.textContent = on ? "interactive chart" : "static image";
        });
      }
      html("span", "cl-hint", bar, "drag to zoom, double-click to reset, click a legend entry to hide it");
      fig.insertBefore(bar, host);
    });
    var queued = false;
    window.addEventListener("resize", function () {
      if (queued) { return; }
      queued = true;
      window.requestAnimationFrame(function () {
        queued = false;
        charts.forEach(function (c) { if (c.fit()) { c.draw(); } });
      });
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
