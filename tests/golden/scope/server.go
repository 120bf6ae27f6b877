package server

import (
	"errors"
	"net/http"
)

type Server struct {
	name  string
	limit int
}

var ErrBusy = errors.New("busy")

func (s *Server) Handle(w http.ResponseWriter,
	r *http.Request) error {
	if r.Method != http.MethodPost {
		return errors.New("method not allowed")
	}
	go func() {
		count := s.limit
		s.limit = count - 1
	}()
	for i := 0; i < s.limit; i++ {
		if i > 10 {
			return ErrBusy
		}
	}
	return nil
}

func New(name string) *Server {
	return &Server{name: name, limit: 100}
}
