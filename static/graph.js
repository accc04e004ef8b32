// Leasehold console: the dependency graph of a job or batch page, drawn by cytoscape (npm,
// static/vendor/). Each [data-graph-url] element gets the graph its URL returns
// ({"nodes": [{id, label, status, role, url}], "edges": [{source, target}]}): parents above
// children, each node coloured by its status with the theme's colours; a click opens the job.
// The page's lists of parents, children and members stay as the text alternative.
(function () {
  "use strict";

  function colour(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#888";
  }

  function style() {
    var statuses = ["Queued", "Scheduled", "InProgress", "Completed", "Failed", "Canceled"];
    var rules = [
      { selector: "node", style: { label: "data(label)", "font-size": 10, color: colour("--fg"),
        "text-valign": "bottom", "text-margin-y": 4, width: 18, height: 18, "border-width": 2,
        "border-color": colour("--line"), "background-color": colour("--muted") } },
      { selector: "node[role = 'self']", style: { "border-color": colour("--focus"), "border-width": 4 } },
      { selector: "node[role = 'callback']", style: { shape: "diamond", width: 22, height: 22 } },
      { selector: "edge", style: { width: 1.5, "line-color": colour("--muted"), "target-arrow-color": colour("--muted"),
        "target-arrow-shape": "triangle", "curve-style": "bezier" } }
    ];
    statuses.forEach(function (s) {
      rules.push({ selector: "node[status = '" + s + "']",
        style: { "background-color": colour("--s-" + s.toLowerCase()) } });
    });
    return rules;
  }

  function draw(box) {
    if (!window.cytoscape) return;
    fetch(box.dataset.graphUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (graph) {
        var elements = graph.nodes.map(function (n) { return { data: n }; })
          .concat(graph.edges.map(function (e) { return { data: e }; }));
        var cy = window.cytoscape({
          container: box, elements: elements, style: style(),
          layout: { name: "breadthfirst", directed: true, spacingFactor: 1.1, padding: 12 },
          userZoomingEnabled: false, boxSelectionEnabled: false, autoungrabify: true
        });
        cy.on("tap", "node", function (e) { window.location.href = e.target.data("url"); });
        box.dataset.drawn = String(graph.nodes.length);
        window.__lhGraph = cy;
      })
      .catch(function () { box.dataset.drawn = "failed"; });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-graph-url]").forEach(draw);
  });
})();
