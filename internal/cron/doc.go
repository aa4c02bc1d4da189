// Package cron implements Cloudflare's cron dialect: parsing, validation and next times.
//
// # The dialect
//
// Parse accepts exactly the expressions Cloudflare Cron Triggers accept
// (https://developers.cloudflare.com/workers/configuration/cron-triggers/; the reference
// implementation is Cloudflare's own parser, cloudflare/saffron, whose answers the tests
// compare against), minus a few forms that Cloudflare accepts but evaluates
// surprisingly (listed below), which are rejected with a message saying what to write
// instead:
//
//   - five fields separated by spaces or tabs: minute (0-59), hour (0-23), day of month
//     (1-31), month (1-12 or JAN-DEC), day of week (1-7 with 1 = Sunday, or SUN-SAT);
//     names in any case; no seconds or year field, no @-macros, no '?';
//   - '*', values, ranges 'a-b', steps '*/n', 'a/n', 'a-b/n' (n from 1 to max-min of
//     the field: 1-59, 1-23, 1-30, 1-11, 1-6), comma lists of those;
//   - day of month, as the whole field only: 'L' (last day), 'LW' (last weekday),
//     'L-n' (n = 1-30 days before the last), 'L-nW' (the weekday nearest to it),
//     'nW' (the weekday nearest to day n, never crossing into another month;
//     nothing in a month without day n);
//   - day of week, as the whole field only: 'nL' (last weekday n of the month, e.g. 6L
//     or FRIL = last Friday), 'n#k' (k-th weekday n of the month, k = 1-5), 'L' alone
//     (Saturday);
//   - when neither day of month nor day of week is a bare '*', a day matches if
//     either matches (a full range such as 1-7 or */1 counts as restricted).
//
// Rejected although Cloudflare's parser accepts them:
//   - wrap-around ranges such as 22-2 or FRI-MON (Cloudflare fires one value before
//     the start of the range); the message gives the explicit list, e.g. 22-23,0-2;
//   - '*' inside a list other than as '*/n' (Cloudflare reads '5,*' as 5 and the
//     field's minimum, not as "every").
//
// Expressions that parse but can never fire (0 0 30 2 *) are valid Cloudflare syntax
// (Schedule.Fires reports false); Validate, the admission check, rejects them.
//
// Next times are computed in a time zone's wall clock (Cloudflare runs in UTC only; the
// CronSchedule's timeZone goes beyond it): a wall time skipped by a daylight-saving
// jump fires as long after the jump as it was after the jump's start (02:30 → 03:30),
// a wall time that occurs twice fires once, at its first occurrence.
//
// The CronSchedule dispatcher, which fires the expressions, is in
// controllers/cronschedule.
package cron
