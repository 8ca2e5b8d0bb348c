%% A process sleeping (timer:sleep) and one blocked reading a socket
%% (gen_tcp:recv, passive) no one writes to, for SECONDS: Erlang
%% processes that wait, which block no thread (tests/beam.rs).
-module(waits).
-export([main/1]).
main([Seconds]) ->
    {ok, L} = gen_tcp:listen(0, [binary, {active, false}]),
    {ok, Port} = inet:port(L),
    spawn(fun() -> {ok, _C} = gen_tcp:connect("127.0.0.1", Port, [binary, {active, false}]), receive stop -> ok end end),
    {ok, S} = gen_tcp:accept(L),
    spawn(fun() -> nap() end),
    spawn(fun() -> slow_read(S) end),
    io:format("ready~n"),
    timer:sleep(list_to_integer(atom_to_list(Seconds)) * 1000),
    halt(0).

nap() -> timer:sleep(100), nap().

slow_read(S) -> _ = gen_tcp:recv(S, 0), slow_read(S).
