package endpoints

import (
	"context"
	"strconv"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/services/accounts/internal/partners"
)

// ListRequest is a decoded GET /api/v1/programs/{id}/partners.
type ListRequest struct {
	UserID    int64
	ProgramID int64
	Page      partners.Page
	// BodyErr is a bad limit or cursor, answered once the caller may read
	// the program.
	BodyErr error
}

// MoneyView is one currency's figures, in its minor units.
type MoneyView struct {
	Currency   string `json:"currency"`
	Revenue    int64  `json:"revenue"`
	Commission int64  `json:"commission"`
}

// ListedLinkView is a link in the list.
type ListedLinkView struct {
	ID        int64  `json:"id"`
	Code      string `json:"code"`
	Active    bool   `json:"active"`
	CreatedAt string `json:"created_at"`
}

// ListedPartnerView is a partner of the program with its links and
// figures; the figures are null when analytics could not answer.
type ListedPartnerView struct {
	ID          int64            `json:"id"`
	Name        string           `json:"name"`
	Email       string           `json:"email"`
	Status      string           `json:"status"`
	EnrolledAt  string           `json:"enrolled_at"`
	Links       []ListedLinkView `json:"links"`
	Clicks      *int64           `json:"clicks"`
	Leads       *int64           `json:"leads"`
	Conversions *int64           `json:"conversions"`
	Money       []MoneyView      `json:"money"`
}

// FiguresMeta says whether the figures are there and the window they
// cover.
type FiguresMeta struct {
	Available bool    `json:"available"`
	From      *string `json:"from"`
	To        *string `json:"to"`
}

// ListResponse is a page: {data, next_cursor, figures}, or a refusal.
type ListResponse struct {
	Data       []ListedPartnerView `json:"data"`
	NextCursor *string             `json:"next_cursor"`
	Figures    FiguresMeta         `json:"figures"`
	Err        error               `json:"-"`
}

var _ endpoint.Failer = ListResponse{}

func (r ListResponse) Failed() error { return r.Err }

func makeList(svc partners.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(ListRequest)
		if r.BodyErr != nil {
			if err := svc.CanRead(ctx, r.UserID, r.ProgramID); err != nil {
				return answerList(err)
			}
			return ListResponse{Err: r.BodyErr}, nil
		}
		l, err := svc.List(ctx, r.UserID, r.ProgramID, r.Page)
		if err != nil {
			return answerList(err)
		}
		out := ListResponse{Data: make([]ListedPartnerView, 0, len(l.Partners)), Figures: FiguresMeta{Available: l.Figures != nil}}
		if l.Figures != nil && !l.Window.From.IsZero() {
			from, to := rfc3339(l.Window.From), rfc3339(l.Window.To)
			out.Figures.From, out.Figures.To = &from, &to
		}
		for _, e := range l.Partners {
			status := "rejected"
			if e.Approved {
				status = "approved"
			}
			v := ListedPartnerView{ID: e.Partner.ID, Name: e.Partner.Name, Email: e.Partner.Email, Status: status,
				EnrolledAt: rfc3339(e.EnrolledAt), Links: make([]ListedLinkView, 0, len(e.Links))}
			for _, k := range e.Links {
				v.Links = append(v.Links, ListedLinkView{ID: k.ID, Code: k.Code, Active: k.Active, CreatedAt: rfc3339(k.CreatedAt)})
			}
			if l.Figures != nil {
				f := l.Figures[e.Partner.ID] // none: no activity in the window
				v.Clicks, v.Leads, v.Conversions = &f.Clicks, &f.Leads, &f.Conversions
				v.Money = make([]MoneyView, 0, len(f.Money))
				for _, m := range f.Money {
					v.Money = append(v.Money, MoneyView{Currency: m.Currency, Revenue: m.Revenue, Commission: m.Commission})
				}
			}
			out.Data = append(out.Data, v)
		}
		if l.Next > 0 {
			c := strconv.FormatInt(l.Next, 10)
			out.NextCursor = &c
		}
		return out, nil
	}
}

func answerList(err error) (any, error) {
	if public(err) {
		return ListResponse{Err: err}, nil
	}
	return nil, err
}
