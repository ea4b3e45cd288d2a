// Slots that benign and attack templates share (generate.ts). Openers, closers, preambles and the
// paragraphs of long texts appear on both sides in the same proportions, so they carry no label: what
// tells an attack from a benign prompt in the generated rows is only the part the template wrote.
export const SHARED: Readonly<Record<string, readonly string[]>> = {
  open: [
    '', '', '', '', '', 'Hi! ', 'Hey! ', 'Hello. ', 'Quick question: ', 'Okay. ', 'So. ', 'Good morning! ',
    'Sorry to bother you again. ', 'Thanks for the help earlier. ', 'One more thing. ', 'Hi there, hope you are well. ',
    'I have a question. ', 'Right. ', 'Alright. ', 'Hey assistant! ', 'Hello again! ', 'Please help: ',
  ],
  close: [
    '', '', '', '', '', ' Thanks!', ' Thank you.', ' Keep it short.', ' Please be detailed.', ' Use bullet points.',
    ' Cheers.', ' :)', ' Answer in two paragraphs at most.', ' No need to be formal.', ' Much appreciated!',
    ' I need this by tonight.', ' Explain it simply.', ' Thanks in advance.',
  ],
  domain: ['northwind.example', 'acme-logistics.example', 'blueharbor.example', 'pinecrest.example', 'larkspur.example', 'orbit-tel.example'],
  name: ['Maya', 'Tom', 'Aisha', 'Jonas', 'Lena', 'Carlos', 'Priya', 'Sam', 'Yuki', 'Olga', 'Ben', 'Fatima', 'Noah', 'Chloe', 'Ravi'],
  lang: ['French', 'German', 'Spanish', 'Italian', 'Portuguese', 'Dutch', 'Polish', 'Japanese', 'Turkish', 'Swedish'],
  company: ['Northwind', 'Acme Logistics', 'Blue Harbor Bank', 'Pinecrest Clinic', 'Larkspur Books', 'Orbit Telecom', 'Sunny Side Bakery', 'Helio Energy'],
  url: ['https://collector.example.net/c', 'http://203.0.113.7/upload', 'https://files.example.org/drop', 'https://hooks.example.com/in', 'https://paste.example.io/new'],
  mail: ['archive-bot@protonmail.example', 'it-support@vendor-example.com', 'backup@mailbox.example.net', 'j.doe.files@example.org', 'records@outside.example'],
  // A paragraph of ordinary prose, for long prompts on both sides.
  para: [
    'The quarterly report shows revenue up four percent on the same period last year, driven mostly by the new subscription tier. Costs rose faster than expected because of the warehouse move, and the finance team expects margins to recover in the second half once the old lease ends in June.',
    'Our hiking trip starts in the village of Saint-Martin, follows the river for about eight kilometres and then climbs to the hut at 2,100 metres. The path is well marked, but the last section is steep and can be icy in the morning, so poles and good boots are a must. Dinner at the hut is served at seven.',
    'The Great Fire of London began in a bakery on Pudding Lane in September 1666 and burned for four days. It destroyed more than thirteen thousand houses and most of the medieval city, yet the recorded death toll was small. Christopher Wren later rebuilt fifty-one churches, including St Paul\'s Cathedral.',
    'Thank you all for joining the kickoff. To recap: design owns the new onboarding screens, backend will add the invite endpoint, and we will demo the first version on the 14th. Open questions are whether we keep the email step and who writes the help article. Please add comments to the doc by Friday.',
    'This stand mixer has a 5.5 litre stainless steel bowl, ten speed settings and a tilt head that makes adding ingredients easy. It comes with a dough hook, a flat beater and a whisk. Reviewers praise how quiet it is and note that the bowl is dishwasher safe, although the attachments should be washed by hand.',
    'Photosynthesis takes place in the chloroplasts of plant cells. Light energy splits water molecules, releasing oxygen, while the energy captured is stored in ATP and NADPH. In the Calvin cycle these molecules are then used to fix carbon dioxide into sugars that the plant uses to grow.',
    'The patch replaces the hand-written retry loop in the HTTP client with the shared backoff helper. Timeouts are now configurable per request, the default stays at thirty seconds, and errors keep their original cause so the logs show what actually failed. Two flaky tests were rewritten to use a fake clock.',
    'Dear residents, the water supply in blocks C and D will be interrupted on Tuesday between 9 am and 1 pm while the main valve is replaced. Please store some water in advance and keep taps closed during the work. We apologise for the inconvenience and thank you for your patience.',
    'Sourdough needs a lively starter, good flour, water and salt, and above all time. Mix, rest for an hour, then fold the dough every thirty minutes for the first two hours. After an overnight rise in the fridge, bake it in a very hot Dutch oven with the lid on for the first twenty minutes.',
    'In chapter three the narrator returns to the town where she grew up and finds the family house sold and painted blue. Her old neighbour, now in his nineties, tells her about the winter the river froze and the whole village walked across it to the church on the other bank.',
    'The city council approved the new cycling plan on Monday. It adds twelve kilometres of protected lanes over three years, starting with the route between the central station and the university. Shop owners on Market Street asked for more loading zones, and the council promised a review after the first year.',
    'Customer wrote in to say the package arrived with a cracked lid. Photos attached. The order was placed on the 3rd and shipped from the Leeds warehouse. She would like a replacement rather than a refund and asked whether she needs to send the damaged item back.',
    'Welcome to the spring semester! Lectures are on Tuesdays and Thursdays from 10 to 12 in room B204. The first assignment is due in week four and counts for twenty percent of the grade. Office hours are on Wednesday afternoons; please book a slot through the course page.',
    'Our garden gets about six hours of sun in summer, mostly in the afternoon. The soil is heavy clay that stays wet in winter, so last year we built two raised beds and filled them with compost. Tomatoes did well, the carrots were small, and the slugs ate almost all the lettuce.',
    'The museum\'s new wing opens on Saturday with an exhibition of early photography, including some of the first portraits made in the 1840s. Tickets are free for under-eighteens, and there are guided tours every hour. The café on the ground floor will stay open until eight on Fridays.',
    'Release 2.3 adds dark mode, faster search and export to CSV. The minimum supported version of the mobile app is now 4.1. Known issue: on some Android tablets the keyboard covers the comment box; a fix is planned for the next minor release. Thanks to everyone who reported bugs in the beta.',
    'Marathon training plan, week 6: Monday rest, Tuesday 8 km easy, Wednesday intervals of 6 x 800 m, Thursday 10 km steady, Friday rest, Saturday 5 km easy with strides, Sunday long run of 24 km at a conversational pace. Drink regularly and eat something within an hour of the long run.',
    'The contract renews automatically each year unless either party gives written notice sixty days before the end of the term. Prices may change once a year with thirty days\' notice. Support is included during business hours, and urgent issues are answered within four hours.',
    'Grandma\'s apple cake: beat 200 g butter with 180 g sugar until pale, add four eggs one at a time, then fold in 250 g flour with a teaspoon of baking powder. Spread in a tin, press apple slices into the top, sprinkle with cinnamon and bake at 180 degrees for about forty-five minutes.',
    'The survey had 1,240 responses. Most people use the app on their phone in the evening, and the top request was offline access. Satisfaction with the new navigation was mixed: long-time users found it slower, new users found it clearer. Full results and the raw data are in the shared folder.',
  ],
  para2: ['[[para]]\n\n[[para]]', '[[para]] [[para]]', '[[para]]\n\n[[para]]\n\n[[para]]', '[[para]]\n\n[[para]]\n\n[[para]]\n\n[[para]]', '[[para]]\n[[para]]\n[[para]]\n[[para]]\n[[para]]'],
}
