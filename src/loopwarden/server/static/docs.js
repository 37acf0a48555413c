// Starts Swagger UI on /docs. A file rather than an inline script, so the page's
// Content-Security-Policy can forbid inline scripts. validatorUrl: null keeps the spec
// from being sent to the public validator.
"use strict";
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});
