package eventsv1

// Topic names. Topics follow "<domain>.<event>.v1"; a breaking change to a
// payload gets a new topic rather than a new meaning for an old one.
const (
	// TopicCatalog carries accounts' catalog upserts (Advertiser, User,
	// Membership, Program, ApiKey, Partner, PartnerProgram, Link) and
	// dashboard sign-outs (SessionRevoked).
	TopicCatalog = "accounts.catalog.v1"
	// TopicCatalogApplied carries CatalogApplied acknowledgements.
	TopicCatalogApplied = "catalog.applied.v1"
	// TopicTracking carries tracking's ClickRecorded, LeadRecorded,
	// VisitRecorded, SaleRecorded and CustomerConverted events.
	TopicTracking = "tracking.events.v1"
	// TopicCommissions carries the commissions ledger's LedgerSaleRecorded,
	// CommissionCreated, CommissionStatusChanged, RefundRecorded,
	// BalanceChanged, NotificationCreated and WithdrawalChanged events. It
	// is kept without expiry: it is the history of the money.
	TopicCommissions = "commissions.events.v1"
	// TopicAPIKeyUsed carries ApiKeyUsed reports (tracking, commissions ->
	// accounts): at most one per key per minute per service process.
	TopicAPIKeyUsed = "apikeys.used.v1"
)

// Envelope.Type values, one per payload message. Consumers switch on these to
// pick the message to unmarshal Envelope.Payload into.
const (
	TypeAdvertiserUpserted     = "catalog.advertiser.upserted"
	TypeUserUpserted           = "catalog.user.upserted"
	TypeMembershipUpserted     = "catalog.membership.upserted"
	TypeProgramUpserted        = "catalog.program.upserted"
	TypeAPIKeyUpserted         = "catalog.api_key.upserted"
	TypePartnerUpserted        = "catalog.partner.upserted"
	TypePartnerProgramUpserted = "catalog.partner_program.upserted"
	TypeLinkUpserted           = "catalog.link.upserted"
	TypeSessionRevoked         = "catalog.session.revoked"
	TypeCatalogApplied         = "catalog.applied"
	TypeClickRecorded          = "tracking.click.recorded"
	TypeLeadRecorded           = "tracking.lead.recorded"
	TypeVisitRecorded          = "tracking.visit.recorded"
	TypeSaleRecorded           = "tracking.sale.recorded"
	TypeCustomerConverted      = "tracking.customer.converted"
	TypeAPIKeyUsed             = "apikeys.key.used"

	TypeLedgerSaleRecorded      = "commissions.sale.recorded"
	TypeCommissionCreated       = "commissions.commission.created"
	TypeCommissionStatusChanged = "commissions.commission.status_changed"
	TypeCommissionPaid          = "commissions.commission.paid"
	TypeRefundRecorded          = "commissions.refund.recorded"
	TypeBalanceChanged          = "commissions.balance.changed"
	TypeNotificationCreated     = "commissions.notification.created"
	TypeWithdrawalChanged       = "commissions.withdrawal.changed"
)
