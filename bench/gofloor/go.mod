module karta-webhook/bench/gofloor

go 1.19
