"""Sphinx extension: keep the built book self-contained and free of console errors.

Jupyter Book 1 always loads sphinx-thebe.  We use no Thebe launch button, yet its configuration
script (a ``const THEBE_JS_URL`` pointing at a CDN) is added to every page, and in some builds
twice, which is a JavaScript error in the reader's console.  This drops the Thebe scripts from
pages, and any duplicated inline script.
"""

from __future__ import annotations


def _drop_thebe(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    kept, seen = [], set()
    for script in scripts:
        filename = str(script)
        body = getattr(script, "attributes", {}).get("body", "") if hasattr(script, "attributes") else ""
        if "THEBE_JS_URL" in body or filename.endswith("sphinx-thebe.js") or "thebe" in filename:
            continue
        key = (filename, body)
        if key in seen:
            continue
        seen.add(key)
        kept.append(script)
    context["script_files"] = kept


def setup(app):
    app.connect("html-page-context", _drop_thebe, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
