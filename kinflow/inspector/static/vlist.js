// A virtualised list: rows of one fixed height, only those in view (plus a
// margin) exist in the DOM, so a cohort of thousands scrolls as fast as one of ten.

import { coalesce, h } from "./dom.js";

const OVERSCAN = 8;

export class VirtualList {
  /**
   * @param {object} options
   * @param {number} options.rowHeight     pixels per row (must match the CSS)
   * @param {number} options.maxRows       rows visible before the list scrolls
   * @param {(item: any, index: number) => Node} options.render
   * @param {(item: any) => string} options.key   stable identity of an item
   */
  constructor({ rowHeight, maxRows, render, key }) {
    this.rowHeight = rowHeight;
    this.maxRows = maxRows;
    this.renderItem = render;
    this.key = key;
    this.items = [];
    this.spacer = h("div.vlist-spacer");
    this.el = h("div.vlist", { role: "list", tabindex: "0" }, this.spacer);
    this.schedule = coalesce(() => this.render());
    this.el.addEventListener("scroll", this.schedule, { passive: true });
  }

  /** Replace the items (keeps the scroll position) and redraw on the next frame. */
  setItems(items) {
    this.items = items;
    this.el.style.height = `${Math.max(1, Math.min(items.length, this.maxRows)) * this.rowHeight + 2}px`;
    this.spacer.style.height = `${items.length * this.rowHeight}px`;
    this.schedule();
  }

  /** Scroll so the item with `key` is in view. */
  reveal(key) {
    const index = this.items.findIndex((item) => this.key(item) === key);
    if (index < 0) return;
    const top = index * this.rowHeight;
    const view = this.el.clientHeight;
    if (top < this.el.scrollTop || top + this.rowHeight > this.el.scrollTop + view) {
      this.el.scrollTop = Math.max(0, top - view / 2);
    }
    this.schedule();
  }

  render() {
    const view = this.el.clientHeight || this.maxRows * this.rowHeight;
    // After the list shrinks, the browser may not have clamped scrollTop yet: do it here.
    const top = Math.min(this.el.scrollTop, Math.max(0, this.items.length * this.rowHeight - view));
    if (top !== this.el.scrollTop) this.el.scrollTop = top;
    const first = Math.max(0, Math.floor(top / this.rowHeight) - OVERSCAN);
    const last = Math.min(this.items.length, Math.ceil((top + view) / this.rowHeight) + OVERSCAN);
    const rows = [];
    for (let i = first; i < last; i++) {
      const row = this.renderItem(this.items[i], i);
      row.classList.add("vrow");
      row.setAttribute("role", "listitem");
      row.style.top = `${i * this.rowHeight}px`;
      row.style.height = `${this.rowHeight}px`;
      rows.push(row);
    }
    this.spacer.replaceChildren(...rows);
    this.el.dataset.rendered = String(rows.length);
    this.el.dataset.total = String(this.items.length);
  }
}
