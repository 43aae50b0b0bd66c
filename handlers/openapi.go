package handlers

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

// openAPIDoc is the OpenAPI 3.1 document of the master's JSON routes,
// written by hand next to the routes; TestOpenAPICoversRoutes keeps it true
// to the router and the answers.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPIDocument returns the OpenAPI document the master serves at
// /api/v1/openapi.json.
func OpenAPIDocument() []byte { return openAPIDoc }

// openAPI answers GET /api/v1/openapi.json.
func (s *server) openAPI(c *gin.Context) {
	c.Header("Cache-Control", "no-cache")
	c.Data(http.StatusOK, "application/json", openAPIDoc)
}
