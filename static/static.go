// Package static embeds the console's CSS, its one small script (console.js)
// and the vendored htmx (2.0.11).
package static

import "embed"

// FS holds the static files served under /static.
//
//go:embed app.css htmx.min.js favicon.svg console.js
var FS embed.FS
