package ledger

import "context"

// CompleteTogether runs CompleteSale's calls as one group would: the
// tests choose the group.
func (s *Service) CompleteTogether(ctx context.Context, saleIDs []int64, who []Attributed) ([]SaleResult, []error, error) {
	calls := make([]completion, len(saleIDs))
	for i := range saleIDs {
		calls[i] = completion{saleID: saleIDs[i], who: who[i]}
	}
	res, err := s.completeSales(ctx, calls)
	if err != nil {
		return nil, nil, err
	}
	out, causes := make([]SaleResult, len(res)), make([]error, len(res))
	for i, r := range res {
		out[i], causes[i] = r.Out.res, r.Out.cause
	}
	return out, causes, nil
}

// RefundTogether runs Refund's calls as one group would.
func (s *Service) RefundTogether(ctx context.Context, ins []RefundInput) ([]RefundResult, []error, error) {
	res, err := s.refundGroup(ctx, ins)
	if err != nil {
		return nil, nil, err
	}
	out, errs := make([]RefundResult, len(res)), make([]error, len(res))
	for i, r := range res {
		out[i], errs[i] = r.Out, r.Err
	}
	return out, errs, nil
}
