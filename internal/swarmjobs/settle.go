package swarmjobs

// SettleTime is how long a member, once started, takes over no job
// (takeover.go): p2pc bench --suite takeover kills an owner only once
// every member is older than this, so that it measures the takeover and
// not the wait.
const SettleTime = settleTime
