package failpoint

// APIHealth ("api/health") is evaluated by every reference server process's /health
// handler (server/api). return(ok) makes /health answer 200 whatever the process's real
// state: a process whose health lies, as a production PD proxy's did (issue 26), for the
// harness's truthful_health check to catch. Any other value, or the failpoint off, leaves
// /health truthful.
const APIHealth = "api/health"
