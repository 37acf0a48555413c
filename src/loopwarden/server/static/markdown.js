// A small Markdown renderer that builds DOM nodes and sets only textContent: model output can
// never become HTML. Images load only from the run's own artifacts (relative paths); remote
// images and links are shown as text and never fetched.
"use strict";

(function () {
  function isRelative(url) {
    return !/^[a-z][a-z0-9+.-]*:/i.test(url) && !url.startsWith("//") && !url.startsWith("/") && !url.includes("..");
  }

  function inline(parent, text, resolveAsset) {
    const pattern = /(!\[([^\]]*)\]\(([^)\s]+)[^)]*\))|(\[([^\]]+)\]\(([^)\s]+)[^)]*\))|(`([^`]+)`)|(\*\*([^*]+)\*\*)|(\*([^*]+)\*)/g;
    let last = 0;
    let match;
    while ((match = pattern.exec(text)) !== null) {
      if (match.index > last) parent.appendChild(document.createTextNode(text.slice(last, match.index)));
      if (match[1]) {
        const alt = match[2], src = match[3];
        if (isRelative(src)) {
          const img = document.createElement("img");
          img.alt = alt;
          img.src = resolveAsset(src);
          parent.appendChild(img);
        } else {
          const span = document.createElement("span");
          span.className = "blocked";
          span.textContent = `[remote image not loaded: ${alt}]`;
          parent.appendChild(span);
        }
      } else if (match[4]) {
        // Links are shown, not followed: text plus the address as plain text.
        parent.appendChild(document.createTextNode(`${match[5]} <${match[6]}>`));
      } else if (match[7]) {
        const code = document.createElement("code");
        code.textContent = match[8];
        parent.appendChild(code);
      } else if (match[9]) {
        const strong = document.createElement("strong");
        strong.textContent = match[10];
        parent.appendChild(strong);
      } else if (match[11]) {
        const em = document.createElement("em");
        em.textContent = match[12];
        parent.appendChild(em);
      }
      last = pattern.lastIndex;
    }
    if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
  }

  // The cells of one table row: split on | that is not escaped (\|) and not inside `code`.
  function cells(row) {
    const out = [];
    let cell = "", code = false;
    const body = row.trim().replace(/^\|/, "").replace(/\|$/, "");
    for (let k = 0; k < body.length; k += 1) {
      const c = body[k];
      if (c === "\\" && body[k + 1] === "|") { cell += "|"; k += 1; continue; }
      if (c === "`") code = !code;
      if (c === "|" && !code) { out.push(cell.trim()); cell = ""; continue; }
      cell += c;
    }
    out.push(cell.trim());
    return out;
  }

  // A pipe table (a header row, a |---|:---:| delimiter row, body rows) as a <table>; rows
  // without a delimiter row stay a table of plain rows. Cells are rendered inline, as text.
  function table(rows, resolveAsset) {
    const node = document.createElement("table");
    const delimiter = rows.length > 1 && cells(rows[1]).every((c) => /^:?-{1,}:?$/.test(c));
    const align = delimiter ? cells(rows[1]).map((c) => (c.endsWith(":") ? (c.startsWith(":") ? "center" : "right") : "")) : [];
    const addRow = (parent, row, tag) => {
      const tr = document.createElement("tr");
      cells(row).forEach((text, k) => {
        const cell = document.createElement(tag);
        if (align[k]) cell.style.textAlign = align[k];
        inline(cell, text, resolveAsset);
        tr.appendChild(cell);
      });
      parent.appendChild(tr);
    };
    let body = rows;
    if (delimiter) {
      const head = document.createElement("thead");
      addRow(head, rows[0], "th");
      node.appendChild(head);
      body = rows.slice(2);
    }
    const tbody = document.createElement("tbody");
    for (const row of body) addRow(tbody, row, "td");
    node.appendChild(tbody);
    return node;
  }

  function render(target, source, resolveAsset) {
    target.replaceChildren();
    const lines = source.replace(/\r\n?/g, "\n").split("\n");
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      if (/^```/.test(line)) {
        const pre = document.createElement("pre");
        const body = [];
        i += 1;
        while (i < lines.length && !/^```/.test(lines[i])) body.push(lines[i++]);
        i += 1;
        pre.textContent = body.join("\n");
        target.appendChild(pre);
        continue;
      }
      const heading = /^(#{1,6})\s+(.*)$/.exec(line);
      if (heading) {
        const h = document.createElement(`h${Math.min(heading[1].length + 1, 6)}`);
        inline(h, heading[2], resolveAsset);
        target.appendChild(h);
        i += 1;
        continue;
      }
      if (/^\s*([-*+]|\d+[.)])\s+/.test(line)) {
        const ordered = /^\s*\d/.test(line);
        const list = document.createElement(ordered ? "ol" : "ul");
        while (i < lines.length && /^\s*([-*+]|\d+[.)])\s+/.test(lines[i])) {
          const li = document.createElement("li");
          inline(li, lines[i].replace(/^\s*([-*+]|\d+[.)])\s+/, ""), resolveAsset);
          list.appendChild(li);
          i += 1;
        }
        target.appendChild(list);
        continue;
      }
      if (/^\|/.test(line)) {
        const rows = [];
        while (i < lines.length && /^\|/.test(lines[i])) rows.push(lines[i++]);
        target.appendChild(table(rows, resolveAsset));
        continue;
      }
      if (line.trim() === "") {
        i += 1;
        continue;
      }
      const paragraph = [];
      while (i < lines.length && lines[i].trim() !== "" && !/^(#{1,6}\s|```|\||\s*([-*+]|\d+[.)])\s)/.test(lines[i])) {
        paragraph.push(lines[i++]);
      }
      const p = document.createElement("p");
      inline(p, paragraph.join(" "), resolveAsset);
      target.appendChild(p);
    }
  }

  window.safeMarkdown = { render, isRelative };
})();
