// capaudit leaderboard page: re-ranks by profile, sorts, draws radars and gap bars.
// All data comes from the JSON block; all text is inserted with textContent.
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("data").textContent);
  const LB = DATA.leaderboard;
  const SETS = LB.sets, COLS = LB.columns;
  const NS = LB.n || SETS.map(() => COLS.map(() => null));
  // the main table: the metrics; the gaps have their own table (signed, direction named)
  const MAIN = COLS.map((c, j) => j).filter(j => !COLS[j].by);
  const CRITERIA = LB.meta.criteria_order;
  const SVGNS = "http://www.w3.org/2000/svg";
  // --all-images: each set on its own images, nothing ranked (no profile, rank, N-avg)
  const UNRANKED = LB.meta.unranked || null;
  let sortKey = UNRANKED ? "set" : "rank", sortDir = 1;

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }
  function svg(tag, attrs) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }
  // d: the metric's decimals (its number format, as every other view writes it); 2 for scores
  function fmt(v, d) {
    if (v === null || v === undefined) return "–";
    const p = d === undefined ? 2 : d;
    return v.toLocaleString("en-US", { minimumFractionDigits: p, maximumFractionDigits: p });
  }
  function signed(v, d) { return v === null || v === undefined ? "–" : (v >= 0 ? "+" : "−") + fmt(Math.abs(v), d); }
  function nText(n) { return n === null || n === undefined ? "" : "n=" + n.toLocaleString("en-US"); }
  // a value's caveat (too-few, "partial: 20 of 100 images", or both), as written by
  // capaudit.leaderboard.status.cell_tag for every view; "" when ok
  const TAGS = LB.tags || [], WHY = LB.status_notes || [];
  function tag(i, j) { return (TAGS[i] || [])[j] || ""; }
  function addTag(td, i, j) {
    const t = tag(i, j);
    if (t) { const s = el("span", t, "status"); s.title = (WHY[i] || [])[j] || ""; td.appendChild(s); }
    // what stands behind the value: the NSFW entries matched, with their counts
    const said = ((LB.cell_notes || {})[SETS[i]] || {})[COLS[j].name];
    if (said) td.appendChild(el("span", said, "hits"));
  }
  // a rank as shown: "=1" when tied (rank intervals overlap: capaudit.leaderboard.ranking)
  function rankLabel(r, i) {
    const tied = r.profile.tied_rank;
    if (!tied) return String(r.rank[i]);
    return (tied.filter(t => t === tied[i]).length > 1 ? "=" : "") + tied[i];
  }

  // same arithmetic as capaudit.leaderboard.ranking.n_avg; a column without a value for
  // some set (averaged: false) is left out, as in Python, never counted as 0.5
  function nAvg(weights) {
    const z = SETS.map(() => new Array(COLS.length).fill(0.5));
    COLS.forEach((c, j) => {
      if (c.averaged === false) return;
      const vals = SETS.map((_, i) => LB.values[i][j]);
      const lo = Math.min(...vals), hi = Math.max(...vals);
      SETS.forEach((_, i) => {
        let v = hi > lo ? (vals[i] - lo) / (hi - lo) : 0.5;
        z[i][j] = c.higher_is_better ? v : 1 - v;
      });
    });
    const crit = {};
    CRITERIA.forEach(name => {
      const idx = COLS.map((c, j) => c.criterion === name && c.averaged !== false ? j : -1).filter(j => j >= 0);
      if (idx.length) crit[name] = SETS.map((_, i) => idx.reduce((a, j) => a + z[i][j], 0) / idx.length);
    });
    let total = 0;
    const score = SETS.map(() => 0);
    for (const c in weights) {
      if (crit[c] && weights[c] > 0) { total += weights[c]; SETS.forEach((_, i) => score[i] += weights[c] * crit[c][i]); }
    }
    const s = score.map(v => total ? v / total : NaN);
    const order = SETS.map((_, i) => i).sort((a, b) => (s[b] - s[a]) || (a - b));
    const rank = new Array(SETS.length);
    order.forEach((i, r) => rank[i] = r + 1);
    return { score: s, rank: rank, criteria: crit };
  }

  const sel = document.getElementById("profile");
  Object.keys(LB.profiles).forEach(p => { const o = el("option", p); o.value = p; sel.appendChild(o); });

  function current() {
    const p = LB.profiles[sel.value];
    const r = nAvg(p.weights);
    r.profile = p;
    return r;
  }

  function renderBoard(r) {
    const table = document.getElementById("board");
    const head = table.tHead, body = table.tBodies[0];
    head.textContent = ""; body.textContent = "";
    const tr = el("tr");
    const keys = (UNRANKED ? [["set", "set"]] : [["rank", "rank"], ["set", "set"], ["navg", "N-avg"], ["interval", "rank 95%"], ["first", "first"]])
      .concat(MAIN.map(j => ["c" + j, COLS[j].name + (COLS[j].higher_is_better ? " ↑" : " ↓")
        + (COLS[j].averaged === false ? " *" : "")]));
    keys.forEach(([k, label]) => {
      const th = el("th", null, k === "set" ? "name pin" : (k === "rank" ? "pin0" : ""));
      // a line may break after each "_" (noun_precision), so the table fits 1,400 px
      label.split("_").forEach((part, n) => {
        if (n) { th.appendChild(document.createTextNode("_")); th.appendChild(el("wbr")); }
        th.appendChild(document.createTextNode(part));
      });
      th.dataset.key = k;
      if (k === sortKey) th.classList.add(sortDir > 0 ? "sorted-asc" : "sorted-desc");
      th.addEventListener("click", () => {
        if (sortKey === k) sortDir = -sortDir; else { sortKey = k; sortDir = 1; }
        render();
      });
      tr.appendChild(th);
    });
    head.appendChild(tr);
    const val = (i, k) => {
      if (k === "rank" || k === "interval") return r.rank[i];
      if (k === "set") return SETS[i];
      if (k === "navg") return -r.score[i];
      if (k === "first") return -((r.profile.first_share || [])[i] || 0);
      const v = LB.values[i][+k.slice(1)];
      return v === null ? Infinity : v;
    };
    const rows = SETS.map((_, i) => i).sort((a, b) => {
      const x = val(a, sortKey), y = val(b, sortKey);
      return (x < y ? -1 : x > y ? 1 : 0) * sortDir || (a - b);
    });
    rows.forEach(i => {
      const row = el("tr");
      row.dataset.set = SETS[i];
      if (!UNRANKED) row.appendChild(el("td", rankLabel(r, i), "pin0"));
      const name = el("td", null, "name pin");
      const a = el("a", SETS[i]);
      a.href = DATA.links[SETS[i]];
      a.title = "worst captions";
      name.appendChild(a);
      row.appendChild(name);
      if (!UNRANKED) {
        row.appendChild(el("td", fmt(r.score[i])));
        const ri = r.profile.rank_interval;
        row.appendChild(el("td", ri ? "[" + ri[i][0] + ", " + ri[i][1] + "]" : "–"));
        const fs = r.profile.first_share;
        row.appendChild(el("td", fs ? Math.round(100 * fs[i]) + "%" : "–"));
      }
      MAIN.forEach(j => {
        const d = COLS[j].decimals;
        const td = el("td", fmt(LB.values[i][j], d));
        const ci = LB.ci[i][j];
        if (ci && ci[0] !== null) td.appendChild(el("span", "[" + fmt(ci[0], d) + ", " + fmt(ci[1], d) + "]", "ci"));
        td.appendChild(el("span", nText(NS[i][j]), "ci"));
        addTag(td, i, j);
        row.appendChild(td);
      });
      body.appendChild(row);
    });
    if (UNRANKED) return;
    const st = document.getElementById("stability");
    const flips = (r.profile.flips || []).filter(f => f.share > 0.05);
    st.textContent = flips.length ? "ranking not settled: " + flips.map(f => f.above + " / " + f.below + " flip in " + Math.round(100 * f.share) + "% of resamples").join("; ") : "";
    st.className = flips.length ? "warn" : "";
    const left = r.profile.left_out || {}, box = document.getElementById("leftout");
    box.textContent = Object.keys(left).length ? "Left out of this ranking (no metric on the board): "
      + Object.keys(left).map(c => c + " (" + left[c] + ")").join("; ") : "";
    box.className = Object.keys(left).length ? "warn" : "";
  }

  function renderCriteria(r) {
    const table = document.getElementById("criteria");
    table.tHead.textContent = ""; table.tBodies[0].textContent = "";
    const names = CRITERIA.filter(c => r.criteria[c]);
    const tr = el("tr");
    ["set"].concat(names.map(c => c + " (w=" + (r.profile.weights[c] || 0) + ")")).forEach((h, k) => tr.appendChild(el("th", h, k ? "" : "name")));
    table.tHead.appendChild(tr);
    SETS.forEach((s, i) => {
      const row = el("tr");
      row.appendChild(el("td", s, "name"));
      names.forEach(c => row.appendChild(el("td", fmt(r.criteria[c][i]))));
      table.tBodies[0].appendChild(row);
    });
  }

  function renderRadars(r) {
    const box = document.getElementById("radars");
    box.textContent = "";
    const names = CRITERIA.filter(c => r.criteria[c]);
    if (names.length < 3) { box.appendChild(el("p", "fewer than three criteria computed: no radar")); return; }
    SETS.forEach((s, i) => {
      const card = el("div", null, "card");
      card.appendChild(el("h3", s));
      const g = svg("svg", { width: 220, height: 200, viewBox: "-110 -95 220 200" });
      const pt = (k, rad) => {
        const a = -Math.PI / 2 + 2 * Math.PI * k / names.length;
        return [rad * Math.cos(a), rad * Math.sin(a)];
      };
      [0.5, 1].forEach(f => g.appendChild(svg("polygon", { points: names.map((_, k) => pt(k, 70 * f).join(",")).join(" "), fill: "none", stroke: "#ccc" })));
      names.forEach((c, k) => {
        const [x, y] = pt(k, 70), [tx, ty] = pt(k, 86);
        g.appendChild(svg("line", { x1: 0, y1: 0, x2: x, y2: y, stroke: "#ddd" }));
        const t = svg("text", { x: tx, y: ty, "font-size": 9, "text-anchor": "middle" });
        t.textContent = c.replace("_", " ");
        g.appendChild(t);
      });
      g.appendChild(svg("polygon", { points: names.map((c, k) => pt(k, 70 * r.criteria[c][i]).join(",")).join(" "), fill: "rgba(40,110,200,0.35)", stroke: "#286ec8" }));
      card.appendChild(g);
      box.appendChild(card);
    });
  }

  // one row per gap, one cell per set: the signed gap with its interval and n, and a bar; every
  // bar of the page on one scale (the largest |gap| or interval end), so bars compare
  function gapInfo(c) {
    return SETS.map(s => { const x = (LB.groups[s] || {})[c.name];
      return x && x.signed_gap !== null && x.signed_gap !== undefined ? x : null; });
  }
  function renderGaps() {
    const box = document.getElementById("gaps");
    box.textContent = "";
    const gapCols = COLS.map((c, j) => j).filter(j => COLS[j].by);
    if (!gapCols.length) { box.appendChild(el("p", "no gaps (no group labels)")); return; }
    const table = el("table"), head = el("tr");
    ["gap (direction)"].concat(SETS).forEach((h, k) => head.appendChild(el("th", h, k ? "" : "name")));
    table.appendChild(head);
    const max = Math.max(1e-9, ...gapCols.map(j => Math.max(0, ...gapInfo(COLS[j]).map(x => !x ? 0 :
      Math.max(Math.abs(x.signed_gap), ...((x.signed_ci || []).filter(v => v !== null).map(Math.abs)))))));
    document.getElementById("gapscale").textContent = "Every bar on one scale: a half-bar = " + fmt(max) + ".";
    gapCols.forEach(j => {
      const c = COLS[j], row = el("tr");
      row.appendChild(el("td", c.metric + " (" + (c.gap || c.by) + ")", "name"));
      // a gap with no value (no caption of a group has the metric) is "–", never NaN
      const infos = gapInfo(c);
      infos.forEach((x, i) => {
        const d = c.decimals;
        const td = el("td", x ? signed(x.signed_gap, d) : "–");
        if (x) {
          const ci = x.signed_ci;
          if (ci && ci[0] !== null) td.appendChild(el("span", "[" + signed(ci[0], d) + ", " + signed(ci[1], d) + "]", "ci"));
          td.appendChild(el("span", nText(NS[i][j]), "ci"));
          addTag(td, i, j);
          const g = svg("svg", { width: 120, height: 12 }), mid = 60, w = 55 * x.signed_gap / max;
          g.appendChild(svg("rect", { x: Math.min(mid, mid + w), y: 1, width: Math.abs(w), height: 10, fill: w >= 0 ? "#d9822b" : "#7b57c2" }));
          if (ci && ci[0] !== null) g.appendChild(svg("line", { x1: mid + 55 * ci[0] / max, x2: mid + 55 * ci[1] / max, y1: 6, y2: 6, stroke: "#000" }));
          g.appendChild(svg("line", { x1: mid, x2: mid, y1: 0, y2: 12, stroke: "#999" }));
          td.appendChild(g);
        }
        row.appendChild(td);
      });
      table.appendChild(row);
    });
    box.appendChild(table);
  }

  function renderCells() {
    const box = document.getElementById("cells");
    SETS.forEach(s => {
      const cells = (LB.groups[s] || {}).intersections;
      if (!cells || !Object.keys(cells).length) return;
      box.appendChild(el("h3", s + ": gender × skin tone (95% interval; n = images of the cell; too-few under --min-n)"));
      const table = el("table"), head = el("tr");
      const names = Object.keys(cells[Object.keys(cells)[0]]);
      ["metric"].concat(names).forEach((h, k) => head.appendChild(el("th", h, k ? "" : "name")));
      table.appendChild(head);
      Object.keys(cells).forEach(m => {
        const row = el("tr");
        row.appendChild(el("td", m, "name"));
        const col = COLS.find(c => c.metric === m && !c.by), d = col ? col.decimals : 2;
        names.forEach(n => {
          const x = cells[m][n], td = el("td", fmt(x.value, d));
          if (x.ci) td.appendChild(el("span", "[" + fmt(x.ci[0], d) + ", " + fmt(x.ci[1], d) + "]", "ci"));
          td.appendChild(el("span", nText(x.images), "ci"));
          if (x.status === "too-few") { const t = el("span", "too-few", "status"); t.title = x.note || ""; td.appendChild(t); }
          row.appendChild(td);
        });
        table.appendChild(row);
      });
      box.appendChild(table);
    });
  }

  function render() {
    if (UNRANKED) { renderBoard(null); return; }
    const r = current();
    renderBoard(r); renderCriteria(r); renderRadars(r);
  }
  if (UNRANKED) {
    const box = document.getElementById("unranked");
    box.textContent = UNRANKED + ": each set's values on its own images; no profile ranks them.";
    box.hidden = false;
    document.getElementById("profilebar").hidden = true;
    ["ranking", "method"].forEach(id => { document.getElementById(id).hidden = true; });
  }
  const notes = document.getElementById("notes");
  const listed = LB.notes.filter(n => n !== UNRANKED);  // not ranked: said in its own box above
  (listed.length ? listed : ["every metric computed"]).forEach(n => notes.appendChild(el("li", n, "note")));
  sel.addEventListener("change", render);
  window.addEventListener("pageshow", render);  // a restored form (back button) re-ranks too
  renderGaps();
  renderCells();
  render();
  document.body.dataset.ready = "1";
})();
