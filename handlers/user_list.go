package handlers

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/views"
)

// userPageSize is how many users one page of the list shows.
const userPageSize = 50

// listUsers shows the users page: everyone may look, admins also act.
func (s *server) listUsers(c *gin.Context) {
	offset, _ := strconv.Atoi(c.Query("offset"))
	vm, err := s.usersVM(c, offset)
	if err != nil {
		s.serverError(c, err)
		return
	}
	vm.Flash = s.takeFlash(c)
	s.render(c, http.StatusOK, views.UsersPage(vm))
}

// usersVM loads one page (userPageSize users) of the list, from offset.
func (s *server) usersVM(c *gin.Context, offset int) (views.UsersVM, error) {
	ctx := c.Request.Context()
	offset = max(offset, 0)
	us, total, err := s.m.Accounts().ListUsers(ctx, userPageSize, offset)
	if err != nil {
		return views.UsersVM{}, err
	}
	vm := views.UsersVM{Layout: s.layout(c, "Users", "users"), Total: total}
	vm.ShowActions = vm.Layout.Admin
	me := ""
	if p := currentUser(c); p != nil {
		me = p.Name
	}
	for _, u := range us {
		email := u.Email
		if !vm.Layout.Admin && u.Username != me {
			email = "" // viewers see their own e-mail only
		}
		vm.Rows = append(vm.Rows, views.UserRow{
			Username: u.Username, Role: u.Role, Email: email, Disabled: u.Disabled,
			CreatedAt: u.CreatedAt.UTC().Format("2006-01-02 15:04"), Self: u.Username == me,
		})
	}
	if len(us) > 0 {
		vm.From, vm.To = offset+1, offset+len(us)
	}
	if offset > 0 {
		vm.PrevURL = userListURL(max(offset-userPageSize, 0))
	}
	if offset+len(us) < total {
		vm.NextURL = userListURL(offset + userPageSize)
	}
	return vm, nil
}

func userListURL(offset int) string {
	if offset <= 0 {
		return "/users"
	}
	return "/users?" + url.Values{"offset": {strconv.Itoa(offset)}}.Encode()
}
