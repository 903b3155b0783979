"use strict";
// Sorting and filtering of the leaderboard page: plain DOM, no network, works from file://.
(function () {
  const table = document.getElementById("board");
  const body = table.tBodies[0];
  const rows = Array.from(body.querySelectorAll("tr.model"));
  const groups = Array.from(body.querySelectorAll("tr.group"));
  const original = Array.from(body.rows);
  const filters = Array.from(document.querySelectorAll("select[data-filter]"));
  const headers = Array.from(table.tHead.rows[1].cells);
  const cells = Array.from(body.querySelectorAll("td[data-col]"));
  let sorted = null;

  function value(row, key) {
    const cell = row.querySelector('td[data-col="' + CSS.escape(key) + '"]');
    return cell && cell.dataset.value !== undefined ? parseFloat(cell.dataset.value) : null;
  }

  function sortBy(header) {
    const key = header.dataset.col;
    const current = header.getAttribute("aria-sort");
    const descending = current === "none" ? header.dataset.best !== "low" : current === "ascending";
    table.querySelectorAll("th.sortable").forEach((th) => th.setAttribute("aria-sort", "none"));
    if (key === "") {
      sorted = null;
      original.forEach((row) => body.appendChild(row));
    } else {
      header.setAttribute("aria-sort", descending ? "descending" : "ascending");
      sorted = key;
      const order = rows.slice().sort((a, b) => {
        const x = value(a, key), y = value(b, key);
        if (x === null || y === null) return (x === null) - (y === null);
        return descending ? y - x : x - y;
      });
      order.forEach((row) => body.appendChild(row));
    }
    apply();
  }

  function apply() {
    const chosen = Object.fromEntries(filters.map((f) => [f.dataset.filter, f.value]));
    const columnShown = (el) => (!chosen.family || el.dataset.family === chosen.family) &&
      (!chosen.language || (el.dataset.languages || "").split(" ").includes(chosen.language));
    const hidden = new Set();
    headers.forEach((th) => { if (!columnShown(th)) hidden.add(th.dataset.col); });
    headers.forEach((th) => th.classList.toggle("hidden", hidden.has(th.dataset.col)));
    cells.forEach((td) => td.classList.toggle("hidden", hidden.has(td.dataset.col)));
    table.querySelectorAll("th.task").forEach((th) => {
      const visible = headers.filter((c) => c.dataset.col.split("|")[0] === th.dataset.task && !hidden.has(c.dataset.col)).length;
      th.colSpan = Math.max(visible, 1);
      th.classList.toggle("hidden", visible === 0);
    });
    let shown = 0;
    rows.forEach((row) => {
      const visible = !chosen.base || row.dataset.base === chosen.base;
      row.classList.toggle("hidden", !visible);
      shown += visible;
    });
    groups.forEach((g) => g.classList.toggle("hidden", sorted !== null || (chosen.base && g.dataset.base !== chosen.base)));
    document.querySelectorAll("section.task").forEach((section) => section.classList.toggle("hidden", !columnShown(section)));
    document.querySelectorAll("section.task svg.chart").forEach((svg) => {
      const base = svg.getAttribute("aria-label").split(" \u00b7 ")[0];
      svg.classList.toggle("hidden", Boolean(chosen.base) && base !== chosen.base);
    });
    document.querySelectorAll("details.sources tbody tr").forEach((row) =>
      row.classList.toggle("hidden", Boolean(chosen.base) && row.dataset.base !== chosen.base));
    const columns = table.querySelectorAll("thead tr:nth-child(2) th:not(.hidden)").length;
    document.getElementById("shown").textContent = shown + " of " + rows.length + " models, " + columns + " of " +
      table.tHead.rows[1].cells.length + " columns shown";
  }

  table.querySelectorAll("th.sortable").forEach((th) => th.addEventListener("click", () => sortBy(th)));
  filters.forEach((f) => f.addEventListener("change", apply));
  apply();
})();
