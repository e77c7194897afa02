-- The deliveries in flight, by tenant and subscription: a claim counts its tenant's
-- (the per-tenant share of the senders) and skips a subscription that has one, without
-- reading the deliveries already done.
CREATE INDEX webhook_deliveries_running ON webhook_deliveries (tenant_id, subscription_id) WHERE status = 'running';
