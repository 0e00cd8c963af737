// Package money holds the commission service's money rules: amounts,
// commission computation, refund arithmetic and balance fitting. It is pure
// domain code (standard library only, no I/O, no clock) so every rule can be
// read and tested alone. The spec leaves these rules to us; this is what we
// chose.
//
// # Amounts
//
//   - Money is an Amount: an int64 count of minor units with its Currency.
//     No float64 is used anywhere, for parsing, computing or formatting.
//   - Currencies are USD and EUR (2 decimals, cents) and VND (0 decimals).
//     ParseCurrency is case-insensitive ("usd" is USD), like the tracking
//     sale route, which upper-cases the code; there is no default currency,
//     and an empty or unknown code is ErrUnsupportedCurrency.
//   - ParseMajor converts major units given as a JSON number's text (a
//     json.Number, or the catalog's decimal strings) exactly: "2.5" USD is
//     250, "1000" VND is 1000, exponents are read exactly ("25e-1"). A value
//     with more decimals than the currency has ("2.505" USD, "1000.5" VND)
//     is refused with ErrTooManyDecimals, never rounded; negatives are
//     ErrNegative, zero is allowed by ParseMajor and refused by
//     ParsePositiveMajor (ErrZero); beyond int64 minor units is ErrOverflow.
//   - Amount.Major formats minor units back with exactly the currency's
//     decimals (250 USD is "2.50", 1000 VND "1000"); Amount.Number gives it
//     as a json.Number.
//
// # Arithmetic
//
//   - Every proportion is round_half_up(a × b / c) over non-negative
//     integers, with the product formed in 128 bits (math/bits), so no
//     product of int64 amounts and rates can overflow; results never exceed
//     the amount they are a part of, so they always fit an int64. Sums that
//     could overflow (open withdrawals) are checked and give ErrOverflow.
//
// # Sale commission (Terms.SaleCommission)
//
//   - Terms come from the catalog's program (NewTerms): commission_type,
//     commission_rate as decimal text, duration_months, the program's
//     currency and lead_commission.
//   - percent: on the customer's first attributed non-test sale only (no
//     sale commission of the customer exists yet, in any status, a reversed
//     one included): round_half_up(amount_minor × rate / 100) in the sale's
//     currency. The rate is an exact decimal (12.5 is 125/10), up to
//     MaxRateDecimals decimal places, above 0 and at most 100.
//   - recurring_percent: the same amount on every attributed non-test sale
//     whose time is before AddMonths(first, duration_months), where first is
//     the time of the customer's first commissioned sale (the first sale
//     itself always earns); duration_months 0 is lifetime.
//   - fixed / recurring_fixed: commission_rate in major units of the
//     program's currency (whatever the sale's currency), one-time or
//     recurring as above. A fixed rate with more decimals than the program
//     currency has is a terms error, not rounded.
//   - A percent commission that rounds to 0 minor units (a tiny sale) is not
//     due (ReasonRoundsToZero); a test sale never earns (ReasonTestSale).
//   - Months: AddMonths adds calendar months in UTC, keeping the time of day
//     and clamping the day to the end of the target month (Jan 31 + 1 month
//     is Feb 28, or Feb 29 in a leap year). This departs from time.AddDate,
//     which overflows (Jan 31 + 1 month = Mar 3) and would let a 1-month
//     program that started on Jan 31 pay the Feb 28 renewal too. The bound
//     is exclusive: with 12 months, the monthly renewals 1..11 earn, the
//     12th (exactly one year later) does not.
//
// # Lead commission (Terms.LeadCommission)
//
//   - lead_commission major units of the program's currency per settled,
//     non-test lead; 0 (or not set) means none. Provisional leads are not
//     settled and earn nothing.
//
// # Refunds (ApplyRefund)
//
//   - A refund's amount is in the sale's minor units; 0 refunds all that is
//     left; the sale's refunded total is capped at the sale amount (the part
//     beyond is ignored, not an error), as the spec's refund table says.
//   - The commission share covered by a cumulative refunded total S of a
//     sale is Share = round_half_up(commission × S / sale). One refund's
//     deduction (the route's deductionAmount, in the commission's currency)
//     is Share(after) − Share(before): the deductions of any split of a sale
//     add up to exactly the commission when the sale is fully refunded, the
//     last refund taking what is left, never a cent more or less.
//   - Status: reversed when the sale's refunded total reaches the sale;
//     otherwise refunded. An approved commission is reduced by the refunded
//     fraction; a pending one is cancelled whole by its first partial refund
//     (deductionAmount informational). A reversed commission is skipped
//     ("already reversed"). Idempotency by refund_id is the caller's.
//   - The partner's balance is debited the deduction only when the
//     commission was credited (approved, not a test); never for a pending
//     one, or for one a refund cancelled while pending.
//
// # Balances
//
//   - A balance may go negative. FitWithdrawals reduces open withdrawals,
//     newest first, until their total is at most max(balance, 0); a
//     withdrawal reduced to 0 is cancelled.
//   - PaidOut: a commission is paid out when the partner's paid withdrawals
//     in its currency cover it, oldest commission first: the longest prefix
//     of the commissions (in creation order, net of refunds) whose total is
//     at most the total paid.
package money
