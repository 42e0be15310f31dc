// flame.js - the script inside the flame graphs of `mimalloc-prof flame` (embedded by tools/flame.c).
// Hover a frame: its name, amount and share below the graph.  Click: zoom to it (its ancestors stay,
// full width and faded); "Reset zoom" or a click on the root goes back.  "Search", Ctrl-F or "/":
// frames whose name matches a regular expression turn magenta, and the share of the total they cover
// (each stack counted once) is shown; Escape clears the search.
"use strict";
(function () {
  const svg = document.documentElement;
  const W = +svg.getAttribute("width"), PAD = 10, CHAR = 7.2;   // 12px monospace: 0.6em a character
  const total = +svg.getAttribute("data-total"), unit = svg.getAttribute("data-unit");
  const details = document.getElementById("details"), matched = document.getElementById("matched");
  const reset = document.getElementById("reset");
  const frames = Array.from(document.querySelectorAll("g.f")).map(function (g) {
    return {g: g, rect: g.querySelector("rect"), text: g.querySelector("text"),
            name: g.getAttribute("data-n"), v: +g.getAttribute("data-v"), x: +g.getAttribute("data-x"),
            w: +g.getAttribute("data-w"),
            d: +g.getAttribute("data-d"), fill: g.querySelector("rect").getAttribute("fill")};
  });
  const hint = details.textContent;
  let zoomed = null, pattern = null;

  function amount(v) {
    if (unit !== "bytes") return v.toLocaleString("en-US") + " " + unit;
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let x = Math.abs(v), i = 0;
    while (x >= 1024 && i < units.length - 1) { x /= 1024; i++; }
    const s = i === 0 ? String(x) : x < 9.995 ? x.toFixed(2) : x < 99.95 ? x.toFixed(1) : x.toFixed(0);
    return (v < 0 ? "-" : "") + s + " " + units[i];
  }

  function share(v, of) { return of ? (100 * v / of).toFixed(2) + "%" : "-"; }

  // Puts a frame at [x, x + w) of the drawing width (fractions) and fits its label.
  function place(f, x, w) {
    const px = PAD + x * (W - 2 * PAD), pw = w * (W - 2 * PAD);
    f.rect.setAttribute("x", px.toFixed(2));
    f.rect.setAttribute("width", Math.max(pw, 0).toFixed(2));
    f.text.setAttribute("x", (px + 3).toFixed(2));
    const n = Math.floor((pw - 6) / CHAR);
    f.text.textContent = n < 3 ? "" : f.name.length <= n ? f.name : f.name.slice(0, n - 2) + "..";
  }

  function covers(a, b) { return a.x <= b.x + 1e-12 && b.x + b.w <= a.x + a.w + 1e-12; }

  function zoom(z) {
    zoomed = z && z.d > 0 ? z : null;
    for (const f of frames) {
      if (zoomed === null) {
        f.g.style.display = "";
        f.g.classList.remove("parent");
        place(f, f.x, f.w);
      } else if (f.d >= zoomed.d && covers(zoomed, f)) {
        f.g.style.display = "";
        f.g.classList.remove("parent");
        place(f, (f.x - zoomed.x) / zoomed.w, f.w / zoomed.w);
      } else if (f.d < zoomed.d && covers(f, zoomed)) {
        f.g.style.display = "";
        f.g.classList.add("parent");
        place(f, 0, 1);
      } else {
        f.g.style.display = "none";
      }
    }
    reset.style.visibility = zoomed ? "visible" : "hidden";
  }

  function search(re) {
    pattern = re;
    const hits = [];
    for (const f of frames) {
      const hit = re !== null && re.test(f.name);
      f.rect.setAttribute("fill", hit ? "#e040e0" : f.fill);
      if (hit) hits.push(f);
    }
    if (re === null) { matched.textContent = ""; return; }
    hits.sort(function (a, b) { return a.x - b.x || b.w - a.w; });
    let covered = 0, end = -1;             // the union of the matches' spans: nested ones count once
    for (const f of hits) {
      if (f.x + f.w <= end) continue;
      covered += f.x + f.w - Math.max(f.x, end);
      end = f.x + f.w;
    }
    matched.textContent = "Matched: " + (100 * covered).toFixed(1) + "% (" +
      amount(Math.round(covered * total)) + "), " + hits.length + " frames";
  }

  function ask() {
    const text = window.prompt("Search frames (regular expression)", pattern ? pattern.source : "");
    if (text === null) return;
    if (text === "") { search(null); return; }
    try {
      search(new RegExp(text));
    } catch (e) {
      matched.textContent = "Not a regular expression: " + e.message;
    }
  }

  for (const f of frames) {
    f.g.addEventListener("mouseover", function () {
      details.textContent = f.name + ": " + amount(f.v) + " (" + share(f.v, total) + " of all" +
        (zoomed ? ", " + share(f.v, zoomed.v) + " of the zoomed frame" : "") + ")";
    });
    f.g.addEventListener("mouseout", function () { details.textContent = hint; });
    f.g.addEventListener("click", function () { zoom(f); });
  }
  reset.addEventListener("click", function () { zoom(null); });
  document.getElementById("search").addEventListener("click", ask);
  window.addEventListener("keydown", function (e) {
    if ((e.ctrlKey && e.key === "f") || e.key === "/") { e.preventDefault(); ask(); }
    else if (e.key === "Escape") search(null);
  });
  zoom(null);
})();
