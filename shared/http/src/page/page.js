// imgest's page: drop photos, see each one's preview, arrange them into an offer and save it,
// look at an offer's crawl, browse the stored images and the orphans (an operator's token) and
// each one's near-duplicates. Plain JS against the documented API (docs/api.md): what any
// client does, in the order it should do it.
"use strict";

const TOKEN_KEY = "imgest-token";
// The precheck takes at most this many photos at once (POST /v1/images/known).
const PRECHECK_MAX = 100;
// Uploads at once: each photo uploads on its own, a few side by side.
const UPLOADS_AT_ONCE = 3;

let token = null;
// The photos in the offer's order: {id, name, state, thumb, error, near}. `state` is one of
// hashing, checking, uploading, known (stored before: not sent), uploaded, linked (loaded with
// the offer), failed; `near` the near-duplicates other clients' offers link that the upload's
// answer named (with IMGEST_SIMILAR=report).
let photos = [];

const $ = (id) => document.getElementById(id);

// A seller's browser gets its token from the marketplace, which puts it in the page's URL
// fragment (`#token=...`: a fragment never reaches a server or a log). It is kept for this
// tab only and taken out of the address bar.
function readToken() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const fresh = fragment.get("token");
  if (fresh) {
    sessionStorage.setItem(TOKEN_KEY, fresh);
    history.replaceState(null, "", location.pathname + location.search);
  }
  token = sessionStorage.getItem(TOKEN_KEY);
  if (token) {
    $("identity").textContent = describeToken(token);
  }
}

function describeToken(jwt) {
  try {
    const payload = jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const claims = JSON.parse(atob(payload));
    const client = claims.client_id ? `, client ${claims.client_id}` : "";
    return `Signed in as ${claims.sub} (${claims.scope || "no scope"}${client}).`;
  } catch (_) {
    return "Using a token that is not a readable JWT.";
  }
}

// One API call; resolves to the JSON answer, or throws an Error whose message is the answer's
// error kind and message.
async function call(method, path, body, contentType) {
  const headers = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (contentType) headers["content-type"] = contentType;
  const response = await fetch(path, { method, headers, body });
  let json = null;
  try {
    json = await response.json();
  } catch (_) {
    // Not JSON: the status says enough.
  }
  if (!response.ok) {
    const error = json && json.error;
    throw new Error(error ? `${error.kind}: ${error.message}` : `HTTP ${response.status}`);
  }
  return json;
}

function thumbOf(image) {
  const variants = image.variants || {};
  const variant = variants.thumb || variants[Object.keys(variants)[0]];
  return variant ? variant.url : null;
}

// A photo's placeholder (its ThumbHash drawn as a PNG data URL, see thumbhash.js), or null
// without one.
function placeholderOf(image) {
  if (!image.thumbhash) return null;
  try {
    const bytes = Uint8Array.from(atob(image.thumbhash), (c) => c.charCodeAt(0));
    return thumbHashToDataURL(bytes);
  } catch (e) {
    return null;
  }
}

function offerId() {
  return $("offer-id").value.trim();
}

function say(text) {
  $("offer-status").textContent = text;
}

function render() {
  const list = $("photos");
  list.replaceChildren(
    ...photos.map((photo, index) => {
      const item = document.createElement("li");
      item.className = "photo";
      item.dataset.state = photo.state;
      if (photo.id) item.dataset.imageId = photo.id;
      item.append(preview(photo.thumb, photo.name || photo.id, photo.placeholder));
      const label = document.createElement("p");
      label.className = "state";
      label.textContent = photo.error ? `${photo.state}: ${photo.error}` : photo.state;
      item.append(label);
      if (photo.near && photo.near.length > 0) {
        // A moderation hint: the same picture is in other clients' offers.
        item.dataset.nearDuplicates = photo.near.map((n) => n.image_id).join(" ");
        const near = document.createElement("p");
        near.className = "near";
        const count = photo.near.length;
        near.textContent = `Near-duplicate of ${count} image${count === 1 ? "" : "s"} in other ` +
          `clients' offers: ${photo.near.map((n) => `${n.image_id} (${n.distance} bits)`).join(", ")}.`;
        item.append(near);
      }
      const buttons = document.createElement("div");
      buttons.className = "buttons";
      buttons.append(
        button("←", `Move photo ${index + 1} left`, "left", index, index === 0),
        button("→", `Move photo ${index + 1} right`, "right", index, index === photos.length - 1),
        button("×", `Remove photo ${index + 1}`, "remove", index, false),
      );
      item.append(buttons);
      return item;
    }),
  );
}

// A photo's thumb over its placeholder (painted until the thumb loads), or a grey square
// while it has neither.
function preview(src, alt, placeholder) {
  const shown = document.createElement(src ? "img" : "div");
  if (src) {
    shown.src = src;
    shown.alt = alt;
  } else {
    shown.className = "no-thumb";
  }
  if (placeholder) shown.style.backgroundImage = `url("${placeholder}")`;
  return shown;
}

function button(text, label, action, index, disabled) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = text;
  b.title = label;
  b.setAttribute("aria-label", label);
  b.dataset.action = action;
  b.dataset.index = String(index);
  b.disabled = disabled;
  return b;
}

function arrange(event) {
  const b = event.target.closest("button[data-action]");
  if (!b) return;
  const i = Number(b.dataset.index);
  const swap = (a, c) => ([photos[a], photos[c]] = [photos[c], photos[a]]);
  if (b.dataset.action === "left" && i > 0) swap(i, i - 1);
  if (b.dataset.action === "right" && i < photos.length - 1) swap(i, i + 1);
  if (b.dataset.action === "remove") photos.splice(i, 1);
  render();
}

// Lowercase hex of a digest.
function hex(buffer) {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
}

// Runs `work` on every item, at most `width` at once.
async function pool(items, width, work) {
  let next = 0;
  const lanes = Array.from({ length: Math.min(width, items.length) }, async () => {
    while (next < items.length) await work(items[next++]);
  });
  await Promise.all(lanes);
}

// Hash each photo, ask which are stored (those are never sent again), upload the others.
async function addFiles(files) {
  const added = Array.from(files, (file) => ({ file, name: file.name, state: "hashing" }));
  photos.push(...added);
  render();
  // The precheck needs both hashes (an MD5 alone is easy to collide): SHA-256 comes from
  // WebCrypto, which a browser offers on secure origins only (https, localhost); elsewhere the
  // photos are uploaded without a precheck.
  const subtle = globalThis.crypto && globalThis.crypto.subtle;
  for (const photo of added) {
    const bytes = await photo.file.arrayBuffer();
    photo.id = SparkMD5.ArrayBuffer.hash(bytes);
    if (subtle) photo.sha256 = hex(await subtle.digest("SHA-256", bytes));
    photo.state = "checking";
  }
  // An offer lists an image once: the same photo added twice stays once.
  photos = photos.filter((p, i) => !p.id || photos.findIndex((q) => q.id === p.id) === i);
  const fresh = added.filter((p) => photos.includes(p));
  render();

  const known = new Map();
  const asked = fresh
    .filter((p) => p.sha256)
    .map((p) => ({ image_id: p.id, sha256: p.sha256 }));
  for (let start = 0; start < asked.length; start += PRECHECK_MAX) {
    const body = JSON.stringify({ images: asked.slice(start, start + PRECHECK_MAX) });
    try {
      const answer = await call("POST", "/v1/images/known", body, "application/json");
      for (const image of answer.known) known.set(image.image_id, image);
    } catch (e) {
      // Without the precheck every photo is uploaded: the server deduplicates anyway.
      say(`precheck failed (${e.message}); uploading every photo`);
    }
  }
  await pool(fresh, UPLOADS_AT_ONCE, async (photo) => {
    const image = known.get(photo.id);
    if (image) {
      Object.assign(photo, {
        state: "known",
        thumb: thumbOf(image),
        placeholder: placeholderOf(image),
      });
    } else {
      photo.state = "uploading";
      render();
      try {
        const type = photo.file.type || "application/octet-stream";
        const stored = await call("POST", "/v1/images", photo.file, type);
        Object.assign(photo, {
          id: stored.image_id,
          state: stored.deduplicated ? "known" : "uploaded",
          thumb: thumbOf(stored),
          placeholder: placeholderOf(stored),
          near: stored.near_duplicates || [],
        });
      } catch (e) {
        Object.assign(photo, { state: "failed", error: e.message });
      }
    }
    delete photo.file;
    render();
  });
}

async function saveOffer(event) {
  event.preventDefault();
  const offer = offerId();
  if (!offer) return say("Name the offer first.");
  const waiting = photos.filter((p) => !["known", "uploaded", "linked"].includes(p.state));
  if (waiting.some((p) => p.state !== "failed")) return say("Wait for the uploads to finish.");
  const ids = photos.filter((p) => !waiting.includes(p)).map((p) => p.id);
  try {
    const body = JSON.stringify({ image_ids: ids });
    const path = `/v1/offers/${encodeURIComponent(offer)}/photos`;
    const saved = await call("PUT", path, body, "application/json");
    showOffer(saved);
    history.replaceState(null, "", `?offer=${encodeURIComponent(offer)}`);
    const count = saved.photos.length;
    say(`Saved ${count} photo${count === 1 ? "" : "s"} to offer ${saved.offer_id}.`);
  } catch (e) {
    say(`Not saved: ${e.message}`);
  }
}

function showOffer(offer) {
  photos = offer.photos.map((p) => ({
    id: p.image_id,
    state: "linked",
    thumb: thumbOf(p),
    placeholder: placeholderOf(p),
  }));
  render();
}

async function loadOffer() {
  const offer = offerId();
  if (!offer) return say("Name the offer first.");
  try {
    showOffer(await call("GET", `/v1/offers/${encodeURIComponent(offer)}/photos`));
    say(`Offer ${offer}: ${photos.length} photos.`);
  } catch (e) {
    say(`Offer ${offer}: ${e.message}`);
  }
}

async function loadCrawl() {
  const offer = offerId();
  if (!offer) return say("Name the offer first.");
  const section = $("crawl");
  try {
    const crawl = await call("GET", `/v1/offers/${encodeURIComponent(offer)}/crawl`);
    $("crawl-state").textContent = `Crawl of ${crawl.offer_id}: ${crawl.state}.`;
    $("crawl-rows").replaceChildren(
      ...crawl.photos.map((p) => {
        const row = document.createElement("tr");
        row.dataset.status = p.status;
        const detail = p.error
          ? [p.error.kind, p.error.http_status && `HTTP ${p.error.http_status}`,
            `${p.error.attempts} attempts`].filter(Boolean).join(", ")
          : p.image_id || "";
        for (const text of [p.url, p.status, detail]) {
          const cell = document.createElement("td");
          cell.textContent = text;
          row.append(cell);
        }
        return row;
      }),
    );
    section.hidden = false;
  } catch (e) {
    section.hidden = true;
    say(`Crawl of ${offer}: ${e.message}`);
  }
}

// Where the next page of stored images starts (the last answer's `next_cursor`).
let imagesCursor = null;

// The first page of stored images (or orphans), or with `more` the next one.
async function browseImages(event, more) {
  if (event) event.preventDefault();
  const orphans = $("orphans-only").checked;
  const query = new URLSearchParams({ orphans: String(orphans), limit: "50" });
  if (more && imagesCursor) query.set("cursor", imagesCursor);
  const status = $("images-status");
  try {
    const page = await call("GET", `/v1/operator/images?${query}`);
    const items = page.images.map(imageItem);
    if (more) $("images").append(...items);
    else $("images").replaceChildren(...items);
    imagesCursor = page.next_cursor || null;
    $("more-images").hidden = !imagesCursor;
    const shown = $("images").children.length;
    const what = orphans ? "Orphans" : "Images";
    status.textContent = `${what}: ${shown}${imagesCursor ? " so far, and more to come" : ""}.`;
  } catch (e) {
    status.textContent = `Stored images: ${e.message}`;
  }
}

function imageItem(image) {
  const item = document.createElement("li");
  item.className = "image";
  item.dataset.imageId = image.image_id;
  item.dataset.offers = String(image.offers);
  const id = document.createElement("p");
  id.textContent = `${image.image_id} (${image.width}×${image.height} ${image.format})`;
  const use = document.createElement("p");
  use.textContent = image.offers > 0
    ? `Linked by ${image.offers} offer${image.offers === 1 ? "" : "s"}.`
    : `Orphan: collected after ${new Date(image.expires_at).toLocaleString()}.`;
  const similar = document.createElement("button");
  similar.type = "button";
  similar.textContent = "Near-duplicates";
  similar.dataset.similar = image.image_id;
  const found = document.createElement("p");
  found.className = "similar-status muted";
  const matches = document.createElement("ul");
  matches.className = "similar";
  item.append(
    preview(thumbOf(image), `Image ${image.image_id}`, placeholderOf(image)),
    id, use, similar, found, matches,
  );
  return item;
}

// A stored image's near-duplicates (GET /v1/images/{id}/similar), listed under it: those the
// index holds (IMGEST_SIMILAR=index or report) among the images the token may see.
async function showSimilar(event) {
  const b = event.target.closest("button[data-similar]");
  if (!b) return;
  const item = b.closest("li.image");
  const status = item.querySelector(".similar-status");
  const list = item.querySelector("ul.similar");
  try {
    const answer = await call("GET", `/v1/images/${encodeURIComponent(b.dataset.similar)}/similar`);
    list.replaceChildren(...answer.matches.map(similarItem));
    const count = answer.matches.length;
    status.textContent = !answer.searched
      ? "Not searched: no signature (too flat, or stored before signatures and not backfilled)."
      : count === 0
        ? "No near-duplicates."
        : `${count} near-duplicate${count === 1 ? "" : "s"}, nearest first:`;
  } catch (e) {
    list.replaceChildren();
    status.textContent = `Near-duplicates: ${e.message}`;
  }
}

function similarItem(match) {
  const item = document.createElement("li");
  item.dataset.imageId = match.image_id;
  item.dataset.distance = String(match.distance);
  const how = [
    match.signal === "trimmed" ? "inside a border" : null,
    match.signal === "inner" ? "away from the edges" : null,
    match.signal === "cropped" ? "cropped: its points agree" : null,
    match.mirrored ? "mirrored" : null,
  ].filter(Boolean);
  item.textContent = `${match.image_id}: ${match.distance} bits apart` +
    (how.length > 0 ? ` (${how.join(", ")})` : "");
  return item;
}

function wireDrop() {
  const zone = $("drop");
  zone.addEventListener("dragover", (e) => {
    e.preventDefault();
    zone.classList.add("over");
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (e) => {
    e.preventDefault();
    zone.classList.remove("over");
    addFiles(e.dataTransfer.files);
  });
  $("files").addEventListener("change", (e) => {
    addFiles(e.target.files);
    e.target.value = "";
  });
}

document.addEventListener("DOMContentLoaded", () => {
  readToken();
  wireDrop();
  $("photos").addEventListener("click", arrange);
  $("offer-form").addEventListener("submit", saveOffer);
  $("load-offer").addEventListener("click", loadOffer);
  $("load-crawl").addEventListener("click", loadCrawl);
  $("images-form").addEventListener("submit", (e) => browseImages(e, false));
  $("more-images").addEventListener("click", () => browseImages(null, true));
  $("images").addEventListener("click", showSimilar);
  const offer = new URLSearchParams(location.search).get("offer");
  if (offer) {
    $("offer-id").value = offer;
    loadOffer();
  }
  render();
});
